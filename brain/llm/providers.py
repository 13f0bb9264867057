"""The tiny interface a model provider answers (the gateway picks the provider from settings).

A provider makes exactly one attempt per ``send``: retries, the deadline, recording and output
validation belong to the gateway, so every provider (Anthropic today, local-model workers
later) gets the same behaviour for free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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

    def send(self, *, system: str, prompt: str, max_tokens: int, timeout: float) -> Reply:
        """One attempt, finished or abandoned within ``timeout`` seconds.

        Raises LLMTimeout, LLMUnavailable (transient) or LLMError (anything else); never a
        provider SDK's own exception.
        """
        ...
