"""``complete``: the one door every model call in brain goes through.

Contract: one ``ModelCall`` row per call, whatever the outcome and whatever serves it; the
caller's timeout is a hard deadline for the whole call, retries included; structured output is
validated before anyone sees it.

Who serves a call is the memory's route for its task (``brain.llm.routing``): Anthropic, a
worker (``brain.llm.worker_provider``: the call waits for a worker program to take and answer
it), or nobody (offline: ``configured`` says False and the caller does without a model).
Callers pass the memory they work for; a call for no memory takes brain's default.

Hazard: the row is written on the caller's database connection, so a caller inside a
transaction that later rolls back loses it. Callers must not hold a transaction open across a
model call anyway (the consolidator's rule).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pydantic
from django.conf import settings
from django.db import transaction

from brain.llm import routing, structured
from brain.llm.errors import LLMError, LLMTimeout, LLMUnavailable, one_line
from brain.llm.providers import Provider, Reply, Request
from brain.llm.worker_provider import WorkerProvider
from brain.models import ModelCall

# A retry needs at least this long to be worth starting; less, and the call fails now.
MIN_ATTEMPT_S = 1.0
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 8.0


def configured(memory=None, task: str | None = None) -> bool:
    """Whether ``memory``'s calls for ``task`` have a model: an offline route never, a worker
    route always (the call waits for a worker), Anthropic when ``ANTHROPIC_API_KEY`` is set.
    Without a memory, brain's default: whether the key is set."""
    route = routing.route_for(memory, task)
    if route.provider == routing.OFFLINE:
        return False
    if route.provider == routing.WORKER:
        return True
    return bool(settings.ANTHROPIC_API_KEY)


def provider_name(memory=None, task: str | None = None) -> str:
    """Who serves ``memory``'s calls for ``task``: "anthropic", "worker" or "offline"."""
    return routing.route_for(memory, task).provider


def provider_from_settings(*, cheap: bool = False, model: str = "") -> Provider:
    """The provider the settings name, built afresh so a settings change takes effect at once.
    ``cheap``: the small model (``BRAIN_LLM_CHEAP_MODEL``) for short, frequent calls;
    ``model``: a route's own model, over both.

    Raises LLMError when none is configured: callers should have asked ``configured()``.
    """
    if settings.ANTHROPIC_API_KEY:
        from brain.llm.anthropic_api import AnthropicProvider  # the SDK loads only when used

        return AnthropicProvider(
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL or None,
            model=model or (settings.BRAIN_LLM_CHEAP_MODEL if cheap else settings.BRAIN_LLM_MODEL),
        )
    raise LLMError("No model provider is configured: set ANTHROPIC_API_KEY.")


def provider_for(memory, task: str, *, cheap: bool = False) -> Provider:
    """The provider ``memory``'s route for ``task`` names. Raises LLMError for an offline
    route, or Anthropic without a key: callers should have asked ``configured()``."""
    route = routing.route_for(memory, task)
    if route.provider == routing.OFFLINE:
        raise LLMError(f"Model calls for {task} are off in this memory (offline).")
    if route.provider == routing.WORKER:
        return WorkerProvider(memory=memory, task=task, model=route.model)
    return provider_from_settings(cheap=cheap, model=route.model)


@dataclass(frozen=True)
class Answer[T: pydantic.BaseModel]:
    """A model's answer: the raw text, the validated object when one was asked for, the row."""

    text: str
    parsed: T | None
    call_id: int


def complete[T: pydantic.BaseModel](
    *,
    task: str,
    system: str,
    prompt: str,
    max_tokens: int,
    timeout: float,
    output: type[T] | None = None,
    cheap: bool = False,
    memory=None,
) -> Answer[T]:
    """Ask the configured model; return its answer, validated as ``output`` when given.

    ``timeout`` is the seconds left in the caller's deadline: <= 0 raises LLMTimeout without
    calling. Transient failures are retried (BRAIN_LLM_MAX_RETRIES) only while the deadline
    leaves room. Raises LLMTimeout, LLMUnavailable, LLMInvalidOutput or LLMError; LLMError
    also when no provider is configured (no row is written then: nothing was asked).
    ``cheap`` asks the small model (a reflection over a conversation, after every voice chat).
    ``memory``: the memory the call works for, whose route for ``task`` picks the provider.
    """
    provider = provider_for(memory, task, cheap=cheap)
    if output is not None:
        system = f"{system}\n\n{structured.instruction(output)}"
    request = Request(system=system, prompt=prompt, max_tokens=max_tokens, output=output)
    call = ModelCall(
        task=task,
        provider=provider.name,
        model=provider.model,
        input_bytes=request.input_bytes,
        timeout_s=timeout,
    )
    with _recorded(call, provider) as started:
        reply = _send_within_deadline(
            provider, call, request, deadline=started + timeout, timeout=timeout
        )
        call.output = reply.text
        call.input_tokens, call.output_tokens = reply.input_tokens, reply.output_tokens
        parsed = (
            structured.parse(reply.text, output, stop_reason=reply.stop_reason)
            if output is not None
            else None
        )
    return Answer(text=reply.text, parsed=parsed, call_id=call.pk)


def embed(*, memory, texts: list[str], timeout: float, dimensions: int | None = None):
    """Vectors for ``texts`` from a worker, when ``memory`` routes its task "embed" to one:
    one per text, each of ``dimensions`` numbers when given (the worker's answer is refused
    otherwise). Recorded as a ``ModelCall`` like every call. No retry: a worker's bad answer
    is already asked again once (``brain.workers``). Raises LLMError when the memory's
    embeddings are not routed to a worker (they are computed here: ``knowledge.embedding``),
    and LLMTimeout, LLMInvalidOutput or LLMError as ``complete`` does.
    """
    route = routing.route_for(memory, EMBED)
    if route.provider != routing.WORKER:
        raise LLMError("This memory's embeddings are computed here, not by a worker.")
    provider = WorkerProvider(memory=memory, task=EMBED, model=route.model)
    call = ModelCall(
        task=EMBED,
        provider=provider.name,
        model=provider.model,
        input_bytes=sum(len(text.encode()) for text in texts),
        timeout_s=timeout,
    )
    with _recorded(call, provider):
        call.attempts = 1
        vectors = provider.embed(texts=texts, timeout=timeout, dimensions=dimensions)
        size = len(vectors[0]) if vectors else 0
        call.output = f"{len(vectors)} vectors of {size} numbers"
    return vectors


EMBED = "embed"


@contextmanager
def _recorded(call: ModelCall, provider: Provider) -> Iterator[float]:
    """Run the call inside; write its row whatever happens (state, error, latency) and link a
    worker's waiting calls to it. Yields the moment it started."""
    started = time.monotonic()
    try:
        yield started
        call.state = ModelCall.State.OK
    except LLMError as error:
        call.state, call.error = error.state, str(error)
        raise
    except Exception as error:  # a bug, not a model failure: record it, then let it surface
        call.state, call.error = ModelCall.State.ERROR, one_line(repr(error))
        raise
    finally:
        if not call.state:  # interrupted (KeyboardInterrupt, SystemExit) mid-call
            call.state, call.error = ModelCall.State.ERROR, "Interrupted before the answer came."
        call.latency_ms = round((time.monotonic() - started) * 1000)
        with transaction.atomic():  # the row and its waiting calls' link: one commit
            call.save()
            if isinstance(provider, WorkerProvider):
                provider.attach(call)


def _send_within_deadline(
    provider: Provider, call: ModelCall, request: Request, *, deadline: float, timeout: float
) -> Reply:
    """Attempts until one answers, a non-transient error, the retry budget or the deadline.

    A loop of ours, where lock-race retries are tenacity's (brain/db/retry.py): each pause is
    the server's Retry-After when it sends one, and whether another attempt starts is decided
    by the time that pause leaves before the caller's deadline, so tenacity's wait and stop
    would both be functions of ours around the same lines."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LLMTimeout(f"No time was left for the model call ({timeout:.1f} s given).")
        call.attempts += 1
        try:
            return provider.send(request, timeout=left)
        except LLMUnavailable as error:
            if call.attempts > settings.BRAIN_LLM_MAX_RETRIES:
                raise
            wait = error.retry_after if error.retry_after is not None else _backoff(call.attempts)
            if deadline - time.monotonic() - wait < MIN_ATTEMPT_S:
                raise  # no room left for another try: the caller hears the real reason
            time.sleep(wait)


def _backoff(attempts: int) -> float:
    """Exponential, with jitter so several workers do not retry in step."""
    return min(BACKOFF_BASE_S * 2 ** (attempts - 1), BACKOFF_MAX_S) * random.uniform(0.75, 1.0)
