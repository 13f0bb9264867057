"""What a model call can fail with. ``str(error)`` is always one line a person can read.

Each class names the ``ModelCall.state`` its failure is recorded under, so the gateway never
keeps a second table of which error means what.
"""

from __future__ import annotations


def one_line(text: str, *, limit: int = 300) -> str:
    """The last non-blank line of ``text``, cut to ``limit`` characters.

    Providers put the useful sentence last ("Overloaded", "max_tokens: must be <= 64000");
    the lines before it are usually a stack or a preamble.
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


class LLMError(Exception):
    """The model gave no usable answer. Not worth retrying as it stands (a bad request, a
    refused key, an unconfigured gateway)."""

    state = "error"

    def __init__(self, reason: str) -> None:
        super().__init__(one_line(reason) or self.__class__.__name__)


class LLMTimeout(LLMError):
    """The call did not finish in the time the caller gave it (or none was left)."""

    state = "timeout"


class LLMUnavailable(LLMError):
    """A transient failure: no connection, rate limited (429), overloaded (529) or a 5xx.

    ``retry_after`` is the provider's own hint in seconds, when it gave one.
    """

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class LLMInvalidOutput(LLMError):
    """The model answered, but not in the shape the caller asked for (not JSON, wrong fields,
    cut off at max_tokens)."""

    state = "invalid"
