"""The export of a whole memory, as `brain memory export` writes it and `GET
/api/memory/export` sends it, and folding such a file back in (`brain memory import`).

``memory.portable`` runs the sections (see it for how an import merges); this module names them
all, in load order: the knowledge and memory apps' first (``memory.portable.SECTIONS``), then
review's, whose findings, guesses and judgements name facts, and its timeline last, after the
findings and facts its events name.
"""

from __future__ import annotations

from collections.abc import Callable

from brain.portable import ImportRejected
from knowledge.models import Memory
from memory import portable
from review import portable as review_portable

__all__ = ["FORMAT", "VERSION", "ImportRejected"]

FORMAT = portable.FORMAT
VERSION = portable.VERSION

SECTIONS = (
    *portable.SECTIONS,
    review_portable.findings_section,
    review_portable.rules_section,
    review_portable.guesses_section,
    review_portable.judgements_section,
    review_portable.events_section,
)


def sections() -> list:
    return list(SECTIONS)


def export_memory(memory: Memory, *, reader) -> dict:
    """Everything in ``memory`` that ``reader`` may read (a person, a ``Reader``, or the read
    layer's ``SYSTEM``, which reads everything)."""
    return portable.export_memory(memory, reader=reader, sections=SECTIONS)


def export_json(memory: Memory, *, reader) -> str:
    return portable.export_json(memory, reader=reader, sections=SECTIONS)


def parse(raw: bytes | str) -> dict:
    """A file's text as an export every section has checked, or ImportRejected."""
    return portable.parse(raw, sections=SECTIONS)


def checked(data) -> dict:
    return portable.checked(data, sections=SECTIONS)


def import_memory(
    memory: Memory,
    data: dict,
    *,
    replace_memory: bool = False,
    by=None,
    on_rows: Callable[[int], None] | None = None,
) -> list[str]:
    """Fold a parsed export into ``memory``; what happened, a line a section."""
    return portable.import_memory(
        memory, data, sections=SECTIONS, replace_memory=replace_memory, by=by, on_rows=on_rows
    )


def rows_in(data: dict) -> int:
    """How many rows an import of ``data`` loads: its progress's total."""
    return portable.rows_in(data, sections=SECTIONS)
