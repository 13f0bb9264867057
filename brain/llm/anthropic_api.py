"""The Anthropic Messages API as a provider: the only module in brain that imports ``anthropic``.

Hazards of the SDK (anthropic 2.x, on httpx2) this module exists to contain:

- its defaults are a 600 s timeout and 2 retries, and its retry loop honours a ``retry-after``
  header of any length, so a single 429 could park a Celery worker for an hour. Here the SDK
  makes exactly one attempt (``max_retries=0``) with the caller's timeout; the gateway retries
  within the caller's deadline;
- the timeout is per network operation (connect, each read), not a wall-clock total: a server
  that trickles bytes can overrun it. The Messages API answers a non-streaming request in one
  piece, so in practice the read timeout is the total;
- its exceptions must not leak: callers see only brain.llm's errors.
"""

from __future__ import annotations

import anthropic

from brain.llm.errors import LLMError, LLMTimeout, LLMUnavailable, one_line
from brain.llm.providers import Reply, Request

# Statuses the Messages API uses for "try again later"; 529 is "overloaded".
_TRANSIENT_STATUSES = {408, 409, 429}
_TRANSIENT_TYPES = {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}


class AnthropicProvider:
    """One Messages API request per ``send``; a fresh client each time, closed after it."""

    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None, model: str) -> None:
        self.api_key = api_key
        self.base_url = base_url  # None: the SDK's own default endpoint
        self.model = model

    def send(self, request: Request, *, timeout: float) -> Reply:
        """``request``'s system text and prompt as one user message; its ``output`` is not sent
        (the instruction in the system text says it)."""
        if timeout <= 0:
            raise LLMTimeout("No time was left for the model call.")
        try:
            # An explicit api_key stops the SDK reading credentials from the environment or
            # from profile files on disk: settings are the one source.
            with anthropic.Anthropic(
                api_key=self.api_key, base_url=self.base_url, timeout=timeout, max_retries=0
            ) as client:
                message = client.messages.create(
                    model=self.model,
                    max_tokens=request.max_tokens,
                    system=request.system,
                    messages=[{"role": "user", "content": request.prompt}],
                    timeout=timeout,
                )
        except anthropic.APITimeoutError as error:
            raise LLMTimeout(f"The model call timed out after {timeout:.1f} s.") from error
        except anthropic.APIConnectionError as error:
            cause = one_line(str(error.__cause__ or error))
            raise LLMUnavailable(f"Cannot reach the Anthropic API: {cause}") from error
        except anthropic.APIStatusError as error:
            raise _status_error(error) from error
        except anthropic.AnthropicError as error:
            raise LLMError(f"Anthropic SDK: {one_line(str(error))}") from error
        text = "".join(block.text for block in message.content if block.type == "text")
        return Reply(
            text=text,
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
            stop_reason=message.stop_reason,
        )


def _status_error(error: anthropic.APIStatusError) -> LLMError:
    """The API's own words for a 4xx/5xx, as LLMUnavailable when waiting could help."""
    said = one_line(error.api_message or "") or one_line(str(error.body or "")) or "no detail"
    kind = f" {error.type}" if error.type else ""
    reason = f"Anthropic API {error.status_code}{kind}: {said}"
    transient = (
        error.status_code in _TRANSIENT_STATUSES
        or error.status_code >= 500
        or error.type in _TRANSIENT_TYPES
    )
    if transient:
        return LLMUnavailable(reason, retry_after=_retry_after(error))
    return LLMError(reason)


def _retry_after(error: anthropic.APIStatusError) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` (seconds) hint, when it is a number."""
    headers = error.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            continue  # an HTTP date: rare enough to fall back to our own backoff
    return None
