"""Keeping every vector from the embedder the settings name.

Vectors from two embedders are not comparable, so search reads only vectors whose stored
embedder name is the current one, and after a change of BRAIN_EMBEDDER this re-embeds the
rest in the background, a batch at a time. Safe to run twice: it only picks up stale rows.

Progress is read from the rows themselves (``status``: how many of a memory's facts have a
vector from the current embedder), so the Knowledge tab shows it while the worker re-embeds and
stops when nothing is stale, with nothing extra to keep in step. ``brain reembed`` does the same
work now, in the terminal, counting facts as it goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q

from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory

BATCH = 256


def stale_facts():
    """Facts whose vector is missing or came from another embedder: named as the ranges on
    either side of the current embedder's name, so an index answers (migration 0015), and
    empty at once when nothing is stale."""
    name = get_embedder().name
    return Fact.objects.filter(
        Q(embedding__isnull=True) | Q(embedder__lt=name) | Q(embedder__gt=name)
    )


@dataclass(frozen=True)
class Status:
    """How far re-embedding has got in one memory: ``done`` of ``total`` facts carry a vector
    from ``embedder``."""

    embedder: str
    done: int
    total: int

    @property
    def counted(self) -> str:
        return f"{self.done:,}/{self.total:,} facts"


def status(memory: Memory) -> Status | None:
    """None when every fact's vector is current (one query); else how far it has got."""
    stale = stale_facts().filter(memory=memory).count()
    if not stale:
        return None
    total = Fact.objects.filter(memory=memory).count()
    return Status(get_embedder().name, total - stale, total)


def reembed_stale(*, seconds: float = 240.0, on_batch: Callable[[int], None] | None = None) -> int:
    """Re-embed stale facts for up to ``seconds``; returns how many were done. ``on_batch(n)``
    is told each batch as it is saved, for progress."""
    embedder = get_embedder()
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = list(stale_facts().order_by("pk").only("pk", "text")[:BATCH])
        if not batch:
            break
        embedded = _embed(batch, embedder)
        done += embedded
        if on_batch:
            on_batch(embedded)
    return done


def reembed(*, facts) -> int:
    """Embed ``facts`` again now with the current embedder, stale or not (a curator's re-embed,
    for vectors suspected wrong: the model's files changed under the same name); returns how
    many."""
    embedder = get_embedder()
    ids = list(facts.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), BATCH):
        batch = Fact.objects.filter(pk__in=ids[start : start + BATCH]).only("pk", "text")
        _embed(list(batch), embedder)
    return len(ids)


def _embed(batch: list[Fact], embedder) -> int:
    for fact, vector in zip(batch, embedder.embed([f.text for f in batch]), strict=True):
        fact.embedding, fact.embedder = vector, embedder.name
    Fact.objects.bulk_update(batch, ["embedding", "embedder"])
    return len(batch)
