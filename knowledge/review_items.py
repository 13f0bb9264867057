"""Review: the one queue where brain asks a person — labelling doubts, conflicts between two
sources, passages placed on no page (``ReviewItem``).

Each item is shown to whoever may read what it is about, by the read rules
(``ReviewItemQuerySet.readable_by``: a conflict when both of its sides are readable, any other
item when every passage it names is), so an administrator sees every item and a Sales reader
never sees a conflict whose other side is HR's — nor learns that it exists. Read as applies,
since the rule reads the reader of the request. Newest first.

Reading a page of the queue is a fixed number of queries whatever it holds (the test pins it):
the items with their source and conflict sides, the passages they name with their sources and
labels, the passages each side cites, and the pages each side is about.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Prefetch

from knowledge.models import Citation, Conflict, Fact, Memory, Passage, ReviewItem, Subject


def waiting(memory: Memory, reader):
    """The items of ``memory`` still asking that ``reader`` may read, newest first."""
    return (
        ReviewItem.objects.for_memory(memory)
        .waiting()
        .readable_by(reader)
        .order_by("-created_at", "-pk")
    )


def count(memory: Memory, reader) -> int:
    """How many items wait for ``reader`` (the count beside the Review link)."""
    return waiting(memory, reader).count()


def shown(items: Iterable[ReviewItem]) -> list[ReviewItem]:
    """``items`` (a queryset of the queue, or a page of it) with everything they show read in a
    fixed number of queries; a conflict's sides carry ``cited`` (their passages, each with its
    source) and ``pages``."""
    queryset = items if hasattr(items, "select_related") else None
    if queryset is not None:
        rows = list(
            queryset.select_related("source", "conflict__old", "conflict__new").prefetch_related(
                Prefetch(
                    "passages",
                    queryset=Passage.objects.as_system(
                        "passages of items the reader reads (an item is read only with all of them)"
                    )
                    .select_related("source")
                    .prefetch_related("labels")
                    .order_by("source_id", "ordinal"),
                )
            )
        )
    else:
        rows = list(items)
    with_sides([row.conflict for row in rows if row.conflict is not None])
    return rows


def with_sides(conflicts: Sequence[Conflict]) -> Sequence[Conflict]:
    """Give each side of ``conflicts`` ``cited`` (the passages it cites, with their sources,
    in source order) and ``pages`` (what it is about): two queries for all of them."""
    sides: dict[int, list[Fact]] = {}
    for conflict in conflicts:
        for fact in (conflict.old, conflict.new):
            sides.setdefault(fact.pk, []).append(fact)
            fact.cited, fact.pages = [], []
    if not sides:
        return conflicts
    cited = (
        Citation.objects.filter(fact_id__in=sides)
        .select_related("passage__source")
        .order_by("passage__source_id", "passage__ordinal")
    )
    for citation in cited:
        for fact in sides[citation.fact_id]:
            fact.cited.append(citation.passage)
    about = Subject.facts.through.objects.filter(fact_id__in=sides).select_related("subject")
    for link in about.order_by("subject__name"):
        for fact in sides[link.fact_id]:
            fact.pages.append(link.subject)
    return conflicts


def item_for(memory: Memory, reader, pk: int) -> ReviewItem | None:
    """Item ``pk`` of the queue as ``reader`` may read it (waiting or not), or None."""
    found = ReviewItem.objects.for_memory(memory).readable_by(reader).filter(pk=pk)
    rows = shown(found)
    return rows[0] if rows else None
