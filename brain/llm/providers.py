"""The tiny interface a model provider answers, and the choice of provider from settings.

A provider makes exactly one attempt per ``send``: retries, the deadline, recording and output
validation belong to the gateway, so every provider (Anthropic today, local-model workers
later) gets the same behaviour for free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from brain.llm.errors import LLMError


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


def configured() -> bool:
    """Whether any model provider is configured (today: ``ANTHROPIC_API_KEY`` is set)."""
    return bool(settings.ANTHROPIC_API_KEY)


def from_settings() -> Provider:
    """The provider the settings name, built afresh so a settings change takes effect at once.

    Raises LLMError when none is configured: callers should have asked ``configured()``.
    """
    if settings.ANTHROPIC_API_KEY:
        from brain.llm.anthropic_api import AnthropicProvider  # the SDK loads only when used

        return AnthropicProvider(
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL or None,
            model=settings.BRAIN_LLM_MODEL,
        )
    raise LLMError("No model provider is configured: set ANTHROPIC_API_KEY.")
