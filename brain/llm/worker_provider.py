"""A provider whose answers come from a worker program (brain/workers.py, docs/API.md Workers).

``send`` writes a ``WaitingCall`` carrying what the model needs (the system text, the prompt,
the answer's JSON schema) and the caller's deadline, then waits for a worker's answer with no
transaction open: it reads the row, then waits on its notification for at most
``workers.POLL_S`` before reading again. At the deadline it marks the call expired by a
conditional update — so an answer arriving after it is refused (409), never used — and raises
LLMTimeout naming the reason: "waiting for a worker". A call the worker failed twice (answers
of the wrong shape, or its model failing) raises the reason it failed with.

The caller must not hold a transaction: a worker could not see the call. Interrupted while
waiting (a task's time limit, a signal), the call is expired on the way out, so no worker
takes work nobody waits for.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone

from brain import workers
from brain.llm import waiting
from brain.llm.errors import LLMError, LLMInvalidOutput, LLMTimeout
from brain.llm.providers import Reply, Request
from brain.models import ModelCall, WaitingCall

OPEN = (WaitingCall.State.WAITING, WaitingCall.State.LEASED)


class WorkerProvider:
    name = "worker"

    def __init__(self, *, memory, task: str, model: str) -> None:
        self.memory = memory  # a Memory, or its id
        self.task = task
        self.model = model  # "" : whatever model the memory's workers serve
        self.calls: list[int] = []

    def send(self, request: Request, *, timeout: float) -> Reply:
        """``request`` for a worker, with its ``output``'s JSON schema and class name, which
        the worker holds its model to and the answer is checked against."""
        output = request.output
        row = self._ask(
            timeout,
            kind=WaitingCall.Kind.CHAT,
            system=request.system,
            prompt=request.prompt,
            max_tokens=request.max_tokens,
            schema=output.model_json_schema() if output is not None else None,
            output_class=f"{output.__module__}.{output.__qualname__}" if output else "",
        )
        return Reply(
            text=row["text"], input_tokens=row["input_tokens"], output_tokens=row["output_tokens"]
        )

    def embed(
        self, *, texts: list[str], timeout: float, dimensions: int | None = None
    ) -> list[list[float]]:
        """One vector per text, from a worker; ``dimensions``: the length each must have."""
        row = self._ask(
            timeout,
            kind=WaitingCall.Kind.EMBED,
            texts=list(texts),
            schema={"dimensions": dimensions} if dimensions else None,
        )
        return row["vectors"]

    def _ask(self, timeout: float, **fields) -> dict:
        """Write the call, wait for its answer; the answered row's values."""
        if timeout <= 0:
            raise LLMTimeout("No time was left for the model call.")
        ends = time.monotonic() + timeout
        memory_id = getattr(self.memory, "pk", self.memory)
        with workers.coordinating():  # one commit; the notification goes out with it
            workers.forget_old(memory_id)
            call = WaitingCall.objects.create(
                memory_id=memory_id,
                task=self.task,
                model=self.model,
                deadline=timezone.now() + timedelta(seconds=timeout),
                **fields,
            )
            workers.notify(workers.calls_channel(memory_id))
        self.calls.append(call.pk)
        settled = False
        try:
            with workers.listening(workers.call_channel(call.pk)):
                waiting.report(self._waiting_words())
                row = self._wait(call, ends, timeout)
            settled = True
            return row
        finally:
            if not settled:  # timed out, failed, or interrupted: nobody waits for it now
                self._expire(call.pk, "The job stopped waiting for this call.")

    def attach(self, row: ModelCall) -> None:
        """Link the calls this provider wrote to the gateway's record of them, and forget their
        words: a prompt holds the memory, and the record keeps only its size (``ModelCall``)."""
        if self.calls:
            WaitingCall.objects.filter(pk__in=self.calls).update(
                model_call=row, system="", prompt="", texts=[], text="", vectors=None
            )

    def _waiting_words(self) -> str:
        model = f" (model {self.model})" if self.model else ""
        return f"Waiting for a worker to take the call{model}"

    def _wait(self, call: WaitingCall, ends: float, timeout: float) -> dict:
        said_taken = False
        while True:
            row = WaitingCall.objects.filter(pk=call.pk).values(
                "state", "text", "vectors", "input_tokens", "output_tokens", "error", "attempts"
            )[0]
            state = row["state"]
            if state == WaitingCall.State.ANSWERED:
                return dict(row)
            if state == WaitingCall.State.FAILED:
                reason = row["error"] or "The worker's answer was refused."
                if reason.startswith("The worker's model failed"):
                    raise LLMError(reason)
                raise LLMInvalidOutput(f"The worker's answer was refused twice: {reason}")
            if state == WaitingCall.State.EXPIRED:
                raise LLMTimeout(self._timeout_words(timeout, row["attempts"]))
            if state == WaitingCall.State.LEASED and not said_taken:
                said_taken = True
                waiting.report("A worker is answering")
            left = ends - time.monotonic()
            if left <= 0:
                if self._expire(call.pk, "Past the job's deadline: no answer is used."):
                    raise LLMTimeout(self._timeout_words(timeout, row["attempts"]))
                continue  # it was answered or failed at the last moment: read it
            workers.wait_for(left)

    def _timeout_words(self, timeout: float, attempts: int) -> str:
        model = f", model {self.model}" if self.model else ""
        how = (
            "no worker took the call"
            if not attempts
            else "a worker took the call but did not answer"
        )
        return (
            f"No worker answered in time: waiting for a worker for {timeout:.0f} s "
            f"(task {self.task}{model}); {how}."
        )

    @staticmethod
    def _expire(call_id: int, why: str) -> bool:
        return bool(
            WaitingCall.objects.filter(pk=call_id, state__in=OPEN).update(
                state=WaitingCall.State.EXPIRED, error=why, lease="", lease_expires_at=None
            )
        )
