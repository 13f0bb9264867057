"""The tiny interface a model provider answers (the gateway picks one by the memory's route).

A provider makes exactly one attempt per ``send``: retries, the deadline, recording and output
validation belong to the gateway, so every provider (Anthropic today, local-model workers
later) gets the same behaviour for free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pydantic


@dataclass(frozen=True)
class Request:
    """What one model call asks, the same for every attempt the gateway makes at it (each
    attempt has its own timeout: what is left of the caller's deadline)."""

    system: str  # with the ``output`` instruction already appended, when there is one
    prompt: str
    max_tokens: int
    # The shape the gateway will validate, already described in ``system``; a provider that
    # can hold its model to a schema (a worker's) sends it along.
    output: type[pydantic.BaseModel] | None = None

    @property
    def input_bytes(self) -> int:
        """The UTF-8 size of what the model is sent: all ``ModelCall`` keeps of the words."""
        return len(self.system.encode()) + len(self.prompt.encode())


@dataclass(frozen=True)
class Reply:
    """One answer from a provider: its text and what it cost."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None  # "end_turn", "max_tokens", "refusal"...


class Provider(Protocol):
    name: str  # recorded as ModelCall.provider
    model: str  # recorded as ModelCall.model

    def send(self, request: Request, *, timeout: float) -> Reply:
        """One attempt at ``request``, finished or abandoned within ``timeout`` seconds.

        Raises LLMTimeout, LLMUnavailable (transient) or LLMError (anything else); never a
        provider SDK's own exception.
        """
        ...
