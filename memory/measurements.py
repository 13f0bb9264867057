"""The seven things the Knowledge tab measures: five counted for their reader by
``review.counts`` (the House page and the brief count the same way), the document's size and
the last pass."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from brain.words import noun
from knowledge.models import Memory
from memory.models import ConsolidationRun, DocumentRevision


@dataclass(frozen=True)
class Measurement:
    key: str
    label: str
    value: str
    detail: str = ""


def _when(moment) -> str:
    local = timezone.localtime(moment)
    return (
        local.strftime("%H:%M")
        if local.date() == timezone.localdate()
        else local.strftime("%-d %b")
    )


# The last measurement's label, by how the last pass ended: a sentence, never the state's code.
LAST_PASS_WORDS: dict[str, str] = {
    ConsolidationRun.State.FILED: "last filed",
    ConsolidationRun.State.KEPT: "last pass kept the queue",
    ConsolidationRun.State.REFUSED: "last pass refused its answer",
    ConsolidationRun.State.FAILED: "last pass failed",
    ConsolidationRun.State.TIMED_OUT: "last pass timed out",
}


def measure(memory: Memory, counted) -> list[Measurement]:
    """What brain measures about ``memory`` for one reader.

    ``counted``: the counts taken for that reader (``review.counts.for_reader``: known,
    learned_this_week, waiting_to_be_filed, guesses, rules, of the facts and waiting lines they
    may read), so a page that shows them beside the measurements counts once."""
    known, this_week = counted.known, counted.learned_this_week
    waiting, guesses, rules = counted.waiting_to_be_filed, counted.guesses, counted.rules
    revision = DocumentRevision.objects.current(memory)
    size_kb = revision.size_bytes / 1024
    last = (
        ConsolidationRun.objects.filter(memory=memory)
        .exclude(state=ConsolidationRun.State.RUNNING)
        .order_by("-finished_at")
        .first()
    )
    last_value = _when(last.finished_at) if last else "never"
    return [
        Measurement("known", f"{noun(known, 'fact')} known", f"{known:,}"),
        Measurement("week", "learned this week", f"{this_week:,}", "since Monday"),
        Measurement("waiting", "waiting to be filed", f"{waiting:,}"),
        Measurement("guesses", f"open {noun(guesses, 'guess', 'guesses')}", f"{guesses:,}"),
        Measurement("rules", f"{noun(rules, 'rule')} you set", f"{rules:,}"),
        Measurement(
            "size",
            f"of {memory.memory_max_kb} KB document",
            f"{size_kb:.1f} KB",
            f"{revision.size_bytes:,} bytes of the {memory.memory_max_kb} KB the document may hold",
        ),
        Measurement(
            "filed",
            LAST_PASS_WORDS.get(last.state, "last pass") if last else "last filed",
            last_value,
            last.outcome if last else "",
        ),
    ]
