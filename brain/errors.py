"""A request refused because of the state things are in, answered the same way everywhere.

A ``StateConflict`` is a request that was understood, well formed and allowed, which the state of
things refuses: the document moved on since it was read, a change was already undone, a conflict
or a finding was already settled, a guess already answered, learning is switched off, a wide rule
was not confirmed. It carries the sentence a person reads (``message``) and, in ``extra``, what
the caller needs to act on it (the document as it is now), as plain JSON values.

Each surface answers every one of them in one place: the API with a 409, ``{"detail": message,
**extra}`` (``brain.api_errors``); a page with a toast, or a message after the redirect
(``brain.htmx``); the CLI with one line; an MCP tool with a tool error. An app raises a subclass
named for what happened (``revisions.DocumentChanged``) and catches it where a page shows it in
its own way (the merge view); nobody maps it to a status code.

Two refusals are not conflicts: bad input is a ``ValidationError`` (a 400, or the form again
with the text kept), and a missing permission is ``knowledge.access.NotPermitted`` (a 403).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError


class StateConflict(Exception):
    """Refused because of the state things are in; nothing was written. ``message`` says why in
    a person's words; ``extra`` is what an answer carries beside it (JSON values)."""

    def __init__(self, message: str, **extra: Any):
        super().__init__(message)
        self.message = message
        self.extra = extra


def in_words(refusal: Exception) -> str:
    """The words a person reads for a refusal, in one line: a conflict's message, every message
    of a ``ValidationError`` in order, or any other refusal's own text (``NotPermitted``)."""
    if isinstance(refusal, StateConflict):
        return refusal.message
    if isinstance(refusal, ValidationError):
        return " ".join(refusal.messages)
    return str(refusal)
