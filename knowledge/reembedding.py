"""Keeping every fact's vector from its memory's embedder.

Each memory has one embedder (``embedding.embedder_for``): the one the settings name
(BRAIN_EMBEDDER), or the model of its workers when it routes its task "embed" to one. Vectors
from two embedders are not comparable, so search reads only vectors whose stored embedder name
is the memory's, and after a change (of BRAIN_EMBEDDER, or of a memory's route) this
re-embeds the rest in the background, a memory and a batch at a time. A fact stored with no
vector (a bulk add or an import, or a write whose worker did not answer) is stale too, and
gets its vector here. Safe to run twice: it only picks up stale rows.

A memory whose worker does not answer is skipped (one line in the log, and the next memory's
turn): its facts stay stale, found by their words and subjects, until a later run finds the
worker back. Nothing here ever fails the beat's task for it.

Progress is read from the rows themselves (``status``: how many of a memory's facts have a
vector from its embedder), so the Knowledge tab shows it while the worker re-embeds and stops
when nothing is stale, with nothing extra to keep in step. ``brain reembed`` does the same work
now, in the terminal, counting facts as it goes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q

from brain import llm
from brain.errors import StateConflict
from knowledge.embedding import BACKGROUND_TIMEOUT_S, Embedder, embedder_for
from knowledge.models import Fact, Memory

logger = logging.getLogger(__name__)

BATCH = 256


def _other_names(name: str) -> Q:
    """Vectors named otherwise than ``name``, as the ranges on either side of it, so the index
    on each memory's embedder names answers (migration 0015), empty at once when none is."""
    return Q(embedder__lt=name) | Q(embedder__gt=name)


def stale_facts(memory: Memory | None = None):
    """Facts of ``memory`` (None: of every memory) whose vector is missing or came from
    another embedder than their memory's."""
    if memory is not None:
        return Fact.objects.as_system("re-embedding every fact of a memory").filter(
            Q(memory=memory) & (Q(embedding__isnull=True) | _other_names(embedder_for(memory).name))
        )
    by_name: dict[str, list[int]] = {}
    for pk in Memory.objects.order_by("pk").values_list("pk", flat=True):
        by_name.setdefault(embedder_for(pk).name, []).append(pk)
    stale = Q(embedding__isnull=True)
    for name, memories in by_name.items():
        stale |= Q(memory_id__in=memories) & _other_names(name)
    return Fact.objects.as_system("re-embedding every fact of a memory").filter(stale)


def names() -> list[str]:
    """The embedders' names of every memory, each once (for what the terminal says)."""
    return sorted({embedder_for(pk).name for pk in Memory.objects.values_list("pk", flat=True)})


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
    stale = stale_facts(memory).count()
    if not stale:
        return None
    total = (
        Fact.objects.as_system("re-embedding every fact of a memory").filter(memory=memory).count()
    )
    return Status(embedder_for(memory).name, total - stale, total)


def reembed_stale(
    *,
    only: Memory | None = None,
    seconds: float = 240.0,
    on_batch: Callable[[int], None] | None = None,
    on_skip: Callable[[Memory, str], None] | None = None,
) -> int:
    """Re-embed stale facts, memory by memory (``only``'s alone when given), for up to
    ``seconds``; returns how many were done. ``on_batch(n)`` is told each batch as it is saved,
    for progress; ``on_skip(memory, why)`` each memory left for later because its worker gave
    no vectors (also logged)."""
    done = 0
    deadline = time.monotonic() + seconds
    for memory in [only] if only else Memory.objects.order_by("pk"):
        if time.monotonic() >= deadline:
            break
        embedder = embedder_for(memory, timeout=BACKGROUND_TIMEOUT_S, background=True)
        stale = stale_facts(memory)
        while time.monotonic() < deadline:
            batch = list(stale.order_by("pk").only("pk", "text")[:BATCH])
            if not batch:
                break
            try:
                embedded = _embed(batch, embedder)
            except llm.LLMError as error:
                logger.warning("Vectors for %s wait for its worker: %s", memory, error)
                if on_skip:
                    on_skip(memory, str(error))
                break
            done += embedded
            if on_batch:
                on_batch(embedded)
    return done


class WorkerAway(StateConflict):
    """Re-embedding asked for now, which a memory's worker did not answer."""


def reembed(*, facts) -> int:
    """Embed ``facts`` again now with their memory's embedder, stale or not (a curator's
    re-embed, for vectors suspected wrong: the model's files changed under the same name);
    returns how many. Raises WorkerAway, saying how many were done, when a memory's worker
    gives no vectors."""
    ids = list(facts.order_by("memory_id", "pk").values_list("memory_id", "pk"))
    by_memory: dict[int, list[int]] = {}
    for memory_id, pk in ids:
        by_memory.setdefault(memory_id, []).append(pk)
    done = 0
    for memory_id, pks in by_memory.items():
        embedder = embedder_for(memory_id, timeout=BACKGROUND_TIMEOUT_S, background=True)
        for start in range(0, len(pks), BATCH):
            batch = (
                Fact.objects.as_system("re-embedding every fact of a memory")
                .filter(pk__in=pks[start : start + BATCH])
                .only("pk", "text")
            )
            try:
                done += _embed(list(batch), embedder)
            except llm.LLMError as error:
                raise WorkerAway(
                    f"Re-embedded {done} of {len(ids)}; the rest wait for their memory's worker, "
                    f"which gave no vectors: {error}"
                ) from error
    return done


def _embed(batch: list[Fact], embedder: Embedder) -> int:
    for fact, vector in zip(batch, embedder.embed([f.text for f in batch]), strict=True):
        fact.embedding, fact.embedder = vector, embedder.name
    Fact.objects.bulk_update(batch, ["embedding", "embedder"])
    return len(batch)
