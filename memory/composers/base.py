"""The interface every composer answers: fold queued candidates into the memory document.

A composer is pure with respect to the database: it gets text and candidates in, and returns
text out. The consolidator owns everything around it (the lease, the deadline, the safety
checks, the transaction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

VOICE_MAX_BYTES = 2048


class ComposerError(Exception):
    """The composer could not produce an answer; the message is its own last line."""


class ComposerUnavailable(ComposerError):
    """A transient failure (network, overload): worth retrying later."""


class ComposerTimeout(ComposerError):
    """The composer ran out of the time the pass gave it."""


@dataclass(frozen=True)
class Candidate:
    """One queued inbox item, as the composer sees it."""

    id: int
    text: str
    origin: str  # insight, voice, chat, terminal, typed, correction, study, import, api
    confidence: str  # high | medium | low
    created_at: datetime
    taught_by: str = ""
    # "add" folds the text in; "forget" removes the document lines that say the same thing.
    action: str = "add"


@dataclass(frozen=True)
class Composition:
    """A composer's answer: the whole new document and the voice distillate."""

    document: str
    voice: str
    notes: list[str] = field(default_factory=list)  # one line per decision, for the run row
    # Set when the composer chose not to write ("keep"): the document is the input, unchanged,
    # and the candidates should stay queued. The reason is shown to a person.
    kept_reason: str | None = None


class Composer(Protocol):
    name: str

    def compose(
        self,
        *,
        document: str,
        candidates: list[Candidate],
        max_bytes: int,
        feedback: str | None = None,
        timeout: float | None = None,
    ) -> Composition:
        """Return the new document (at most ``max_bytes`` UTF-8 bytes when it can) and voice.

        ``feedback`` is set on the one retry after an over-cap answer and names the excess.
        ``timeout`` is the number of seconds left in the pass.
        """
        ...
