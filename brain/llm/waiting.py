"""What a job shows while a model call waits: a note the provider gives, the job displays.

    with llm.reporting(lambda words: _step(session, words)):
        llm.complete(..., memory=memory)

A worker call says "Waiting for a worker…" when it is written and "A worker is answering…"
when one takes it. The note is a context variable, so a job that sets nothing pays nothing,
and each thread or task sees only its own. A note that fails (its row gone) is logged and
ignored: showing progress must never fail the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

logger = logging.getLogger(__name__)

_note: ContextVar[Callable[[str], None] | None] = ContextVar("brain_llm_note", default=None)


@contextmanager
def reporting(note: Callable[[str], None]) -> Iterator[None]:
    """Calls made inside report their progress to ``note`` (one sentence, no full stop)."""
    token = _note.set(note)
    try:
        yield
    finally:
        _note.reset(token)


def report(words: str) -> None:
    note = _note.get()
    if note is None:
        return
    try:
        note(words)
    except Exception:
        logger.exception("a progress note failed: %s", words)
