"""The worker's loop: take a call, keep its lease while the local model works, post the answer.

Rules, and why:
- One call at a time per worker (start several workers for more): a local model serves one
  request at a time anyway, and a lease then always means one model busy on it.
- The lease is kept alive by a heartbeat thread every third of its length, so a call that
  takes longer than a lease is not handed to a second worker meanwhile; a worker that dies
  stops the heartbeats and the server hands the call out again when the lease runs out.
- The answer is always posted and the server decides: a lease that was lost meanwhile is a 409
  (logged, the loop goes on), a revoked token a 403 (the worker stops with a message saying so
  and a non-zero status: there is nothing it could do with that token any more).
- A model failure is posted as the call's error, so the job waiting on it hears why at once
  instead of at its deadline. So is an answer to a call that asked for JSON which the model
  stopped at the token limit: the job hears "cut off at max_tokens", not "not JSON".
- The server away (no answer, 5xx, 429): back off 0.5 s, doubling up to MAX_PAUSE_S, each
  pause drawn between half and all of that (jitter, so workers that lost the server together do
  not come back in step), for as long as it takes; one log line when it goes and one when it is
  back, not one per attempt. The same for a local model that is not there at start. A 502 or
  504 to a long poll says a proxy may be cutting it short, and that a lower --wait avoids it.
  An answer that cannot be posted is tried again the same way until the call's deadline, after
  which the server would refuse it anyway.
- SIGTERM or SIGINT while waiting for a call: stop at once (exit 0). While serving one: finish
  it, post the answer, then stop (exit 0); a second signal abandons it at once — nothing is
  posted, and its lease runs out so another worker takes it. A signal in the instant between
  the server handing a call over and the worker starting on it is taken as "while waiting": that
  call too comes back to the others when its lease runs out.
- One line per call on stderr: the call, its task, how long, the outcome.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from brain.worker.local import LocalModel, ModelAnswer, ModelFailed, listed_models
from brain.worker.server import BrainServer, Call, LeaseLost, Refused, ServerAway, TokenRefused

log = logging.getLogger("brain.worker")

FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 15.0
DEFAULT_WAIT_S = 20.0
EXIT_TOKEN_REFUSED = 3


class Stopping(BaseException):
    """Raised by the signal handler to leave a wait at once (BaseException: no ``except
    Exception`` on the way can swallow it)."""


class Backoff:
    """Pauses that double from ``first`` up to ``cap``, each drawn in [half, all] of that."""

    def __init__(self, first: float = FIRST_PAUSE_S, cap: float = MAX_PAUSE_S) -> None:
        self.first, self.cap, self.failures = first, cap, 0

    def next(self) -> float:
        self.failures += 1
        return min(self.first * 2 ** (self.failures - 1), self.cap) * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


class Worker:
    def __init__(
        self,
        *,
        server: BrainServer,
        connect_model: Callable[[], LocalModel],
        name: str,
        model: str,
        wait: float = DEFAULT_WAIT_S,
        backoff: Backoff | None = None,
    ) -> None:
        self.server = server
        self.connect_model = connect_model
        self.name = name
        self.model_name = model
        self.wait = wait
        self.backoff = backoff or Backoff()
        self.served = 0
        self._stop = threading.Event()
        self._busy = False
        self._away: str | None = None  # what is away now ("the server", "the local model")

    def stop(self) -> None:
        """Stop after the call in hand (or after the current long poll): what SIGTERM does."""
        self._stop.set()

    def run(self, *, handle_signals: bool = True) -> int:
        """Serve calls until stopped; the exit status (0, or EXIT_TOKEN_REFUSED)."""
        with self._signals() if handle_signals else _nothing():
            try:
                model = self._connect()
                log.info(
                    "serving %s on %s (%s API) as %r for %s",
                    self.model_name,
                    model.endpoint,
                    model.api,
                    self.name,
                    self.server.base.removesuffix("/api/worker/calls"),
                )
                while not self._stop.is_set():
                    call = self._next_call()
                    if call is not None:
                        self._busy = True
                        try:
                            self._serve(call, model)
                        finally:
                            self._busy = False
            except TokenRefused as refused:
                log.error("%s", token_message(refused))
                return EXIT_TOKEN_REFUSED
            except Stopping:
                pass
        log.info("stopped after %d call%s", self.served, "" if self.served == 1 else "s")
        return 0

    # Taking calls ---------------------------------------------------------------------------

    def _connect(self) -> LocalModel:
        while True:
            if self._stop.is_set():
                raise Stopping
            try:
                model = self.connect_model()
            except ModelFailed as error:
                self._went_away("the local model", str(error))
                self._pause()
                continue
            self._came_back()
            names = listed_models(model.endpoint, model.api)
            if names is not None and not _is_listed(self.model_name, names):
                log.warning(
                    "%s lists no model named %s (it lists: %s); calls will fail until it does",
                    model.endpoint,
                    self.model_name,
                    ", ".join(names[:10]) or "none",
                )
            return model

    def _next_call(self) -> Call | None:
        try:
            call = self.server.next_call(worker=self.name, models=[self.model_name], wait=self.wait)
        except ServerAway as error:
            why = str(error)
            if why.startswith(("HTTP 502", "HTTP 504")) and self.wait > 5:
                why += (
                    f"; a proxy in front of the server may end requests sooner than --wait "
                    f"({self.wait:g} s): if this repeats, try a lower --wait"
                )
            self._went_away("the server", why)
            self._pause()
            return None
        except Refused as error:
            self._went_away("the server", f"it refused to hand out calls: {error}")
            self._pause()
            return None
        self._came_back()
        return call

    def _pause(self) -> None:
        self._stop.wait(self.backoff.next())

    def _went_away(self, what: str, why: str) -> None:
        if self._away != what:
            log.warning("%s is not answering (%s); trying again until it does", what, why)
            self._away = what

    def _came_back(self) -> None:
        self.backoff.reset()
        if self._away is not None:
            log.info("%s is answering again", self._away)
            self._away = None

    # Serving one call -----------------------------------------------------------------------

    def _serve(self, call: Call, model: LocalModel) -> None:
        started = time.monotonic()
        deadline = started + call.deadline_in
        if call.deadline_in <= 0:
            self._line(call, started, "arrived past its deadline: nothing done")
            return
        heartbeat = _Heartbeat(self.server, call)
        heartbeat.start()
        try:
            answer, outcome = _run(call, model)
        except Stopping:
            self._line(call, started, "abandoned (stopping): its lease runs out for another worker")
            raise
        finally:
            heartbeat.stop()
        model_ms = (time.monotonic() - started) * 1000
        outcome = self._post(call, answer, outcome, deadline=deadline)
        self.served += 1
        self._line(call, started, f"{outcome} (model {model_ms:.0f} ms)")

    def _post(self, call: Call, answer: dict, outcome: str, *, deadline: float) -> str:
        """Post ``answer``; the outcome as the log line says it. TokenRefused goes up."""
        pauses = Backoff()
        while True:
            try:
                self.server.answer(call, answer)
                return outcome
            except LeaseLost as error:
                return f"not used, the lease was no longer ours ({error})"
            except Refused as error:
                return f"refused by the server ({error})"
            except TokenRefused as refused:
                self._line(call, None, f"answer refused: {token_message(refused)}")
                raise
            except ServerAway as error:
                pause = pauses.next()
                if time.monotonic() + pause >= deadline:
                    return f"dropped: the server was away until the call's deadline ({error})"
                self._went_away("the server", str(error))
                time.sleep(pause)

    def _line(self, call: Call, started: float | None, outcome: str) -> None:
        took = "" if started is None else f" {(time.monotonic() - started) * 1000:.0f} ms"
        log.info("call %s %s %s:%s %s", call.id, call.task, call.kind, took, outcome)

    # Signals --------------------------------------------------------------------------------

    @contextmanager
    def _signals(self) -> Iterator[None]:
        handled = (signal.SIGTERM, signal.SIGINT)
        previous = {number: signal.getsignal(number) for number in handled}
        for number in handled:
            signal.signal(number, self._on_signal)
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        again = self._stop.is_set()
        self._stop.set()
        if not self._busy or again:
            raise Stopping
        log.info(
            "%s: finishing the call in hand, then stopping (again to abandon it)",
            signal.Signals(number).name,
        )


def _run(call: Call, model: LocalModel) -> tuple[dict, str]:
    """The local model's answer to ``call`` as the protocol posts it, and the outcome's words."""
    try:
        if call.kind == "embed":
            result: ModelAnswer = model.embed(texts=call.texts, timeout=call.deadline_in)
            return result.wire(), f"answered, {len(call.texts)} vectors"
        if call.kind != "chat":
            raise ModelFailed(f"this worker does not serve {call.kind!r} calls")
        result = model.chat(
            system=call.system,
            prompt=call.prompt,
            max_tokens=call.max_tokens,
            schema=call.schema,
            timeout=call.deadline_in,
        )
        if result.cut_off and call.schema is not None:
            raise ModelFailed(
                f"the answer was cut off at max_tokens ({call.max_tokens}) before it was complete"
            )
        return result.wire(), "answered"
    except ModelFailed as error:
        return {"error": str(error)}, f"model failed, posted as the call's error: {error}"


class _Heartbeat(threading.Thread):
    """Keeps one call's lease while the model works; stops at a 409 or a refused token (the
    answer's post then hears the same from the server)."""

    def __init__(self, server: BrainServer, call: Call) -> None:
        super().__init__(name=f"heartbeat-{call.id}", daemon=True)
        self.server, self.call = server, call
        self.every = _every(call.lease_expires_in)
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            try:
                self.every = _every(self.server.heartbeat(self.call))
            except (LeaseLost, TokenRefused, Refused):
                return
            except ServerAway:
                continue

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=1)


def _every(lease_s: float) -> float:
    return max(lease_s / 3, 0.2)


def token_message(refused: TokenRefused) -> str:
    if "may only take and answer model calls" in str(refused):  # a page, not /api/worker/
        return (
            f"the server refused the request ({refused}): --server must be the address brain "
            "is served at (https://brain.example.org), not one of its pages."
        )
    if refused.status == 401:
        return (
            f"the server does not know this worker token (HTTP 401: {refused}). Check --token, "
            "or make one with `brain worker-token create` on the server."
        )
    return (
        f"the server refused this worker token (HTTP {refused.status}: {refused}). "
        "Stopping: ask an administrator for a new one (`brain worker-token create`)."
    )


def _is_listed(model: str, names: list[str]) -> bool:
    return model in names or f"{model}:latest" in names or model.removesuffix(":latest") in names


@contextmanager
def _nothing() -> Iterator[None]:
    yield
