"""The interface every composer answers: fold queued candidates into the memory document.

A composer is pure with respect to the database: it gets text and candidates in, and returns
text out. The consolidator owns everything around it (the lease, the deadline, the safety
checks, the transaction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from knowledge.statements import compare

VOICE_MAX_BYTES = 2048

# Something tried that went wrong (a fact taught with outcome False, valence "failure") is filed
# under its own heading, one "- Avoid: …" line each, and nowhere else: stated plainly it would
# read as advice. Recall (knowledge.retrieval) says it the same way.
FAILURES_HEADING = "What has gone wrong before"
AVOID_PREFIX = "Avoid: "
_MARKER = re.compile(r"^[-*+]\s+")
_AVOID_LABEL = re.compile(r"^(?:avoid\s*:\s*)+", re.IGNORECASE)  # "Avoid: ", once or repeated
_AVOID_WORD = re.compile(r"^avoid\s+(?=\S)", re.IGNORECASE)  # "Avoid setting …", said as advice


def statement_of(line: str) -> str:
    """What a document line states: the bullet marker and any "Avoid:" label removed."""
    text = _MARKER.sub("", " ".join(line.split()))
    bare = _AVOID_LABEL.sub("", text)
    return bare[:1].upper() + bare[1:] if bare != text else text


def is_avoid_line(line: str) -> bool:
    """The line states something to avoid: "- Avoid: …"."""
    return bool(_AVOID_LABEL.match(_MARKER.sub("", line.strip())))


def failure_statement(text: str) -> str:
    """What a failure says was done, without any "Avoid:" label or "Avoid …" its teacher wrote."""
    bare = _AVOID_WORD.sub("", statement_of(text))
    return bare[:1].upper() + bare[1:]


def avoid(text: str) -> str:
    """A failure's statement as a line's text: exactly one "Avoid: " label in front (a label or
    an "Avoid …" the teacher already wrote is not repeated: never "Avoid: Avoid: …")."""
    return AVOID_PREFIX + failure_statement(text)


def says_the_same(a: str, b: str) -> bool:
    """Two statements say the same thing, or one says it with more detail."""
    return compare(a, b).verdict in ("same", "refinement") or compare(b, a).verdict == "refinement"


def is_failures_heading(name: str) -> bool:
    return " ".join(name.split()).casefold() == FAILURES_HEADING.casefold()


def failure_lines(document: str) -> list[str]:
    """The document's lines about what went wrong: those under FAILURES_HEADING and any
    "Avoid: …" line elsewhere."""
    found, section = [], ""
    for line in document.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            section = stripped.lstrip("#").strip() if stripped.startswith("## ") else section
        elif stripped and (is_failures_heading(section) or is_avoid_line(stripped)):
            found.append(stripped)
    return found


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
    # "failure": something tried that went wrong, filed under FAILURES_HEADING as "Avoid: …".
    valence: str = "fact"
    outcome: bool | None = None  # the outcome it was taught with, if any

    @property
    def is_failure(self) -> bool:
        return self.valence == "failure"


@dataclass(frozen=True)
class Request:
    """What a pass asks its composer: the same on its one retry but for ``feedback`` (each
    attempt has its own timeout: what is left of the pass)."""

    document: str  # the current memory document
    candidates: list[Candidate]
    max_bytes: int  # the cap on the new document, in UTF-8 bytes
    feedback: str | None = None  # set on the one retry after an over-cap answer, naming the excess


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

    def compose(self, request: Request, *, timeout: float | None = None) -> Composition:
        """Return the new document (at most ``request.max_bytes`` UTF-8 bytes when it can) and
        voice. ``timeout`` is the number of seconds left in the pass."""
        ...
