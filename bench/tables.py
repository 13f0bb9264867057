"""Markdown tables for docs/BENCHMARKS.md, written one way by every benchmark."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(header: Sequence[str], rows: Iterable[Sequence[object]], *, words: int = 1) -> list[str]:
    """A Markdown table as lines: ``header``, its rule, then a line a row. The first ``words``
    columns hold words and are left-aligned; the rest hold figures and are right-aligned, so
    that their digits line up. Cells are written as given: a row formats its own figures."""
    rule = "|" + "---|" * words + "---:|" * (len(header) - words)
    return [_line(header), rule, *(_line(row) for row in rows)]


def _line(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"
