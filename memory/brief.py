"""This morning's brief: what brain learned, what waits, what changed, in a few sentences.

Written daily by beat. The wording is computed here from the numbers; when a model is
configured it may rewrite those sentences more naturally, never adding a fact of its own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from brain import llm
from knowledge import visibility
from knowledge.models import Fact, Memory
from memory.models import Brief, Change, InboxItem

logger = logging.getLogger(__name__)
WINDOW = timedelta(days=1)
BRIEF_TIMEOUT_S = 30.0


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def compose(memory: Memory, *, reader, now=None) -> str:
    """The brief in plain words, from the last day's numbers as ``reader`` may count them."""
    now = now or timezone.now()
    since = now - WINDOW
    learned = Fact.objects.for_memory(memory).readable_by(reader).filter(created_at__gte=since)
    learned_count = learned.count()
    latest = learned.order_by("-created_at").first()
    waiting = InboxItem.objects.for_memory(memory).pending().readable_by(reader).count()
    changes = Change.objects.for_memory(memory).filter(created_at__gte=since)
    change_count = changes.count()
    last_change = changes.order_by("-number").first()
    sentences = []
    if learned_count:
        sentences.append(
            f"Since yesterday brain learned {_plural(learned_count, 'fact')}, most "
            f"recently “{latest.text.rstrip('.')}”."
        )
    else:
        sentences.append("Nothing new was learned since yesterday.")
    if waiting:
        sentences.append(
            f"{_plural(waiting, 'line')} {'waits' if waiting == 1 else 'wait'} to "
            "be filed into the memory document."
        )
    else:
        sentences.append("Nothing is waiting to be filed.")
    if change_count:
        sentences.append(
            f"The document changed {_plural(change_count, 'time')}; the last: "
            f"{last_change.summary.rstrip('.')}."
        )
    return " ".join(sentences)


def for_today(memory: Memory, reader) -> tuple[str, datetime | None]:
    """What a page shows ``reader`` as this morning's brief, and when it was written: today's
    written brief when its numbers are theirs too (it was written for the household, whose
    numbers a reader who reads more, or less, does not share), else the same sentences composed
    now from their own numbers (written_at None)."""
    latest = Brief.objects.latest_for(memory)
    if latest and timezone.localtime(latest.written_at).date() == timezone.localdate():
        now = latest.written_at
        everyone = visibility.household(memory)
        if compose(memory, reader=reader, now=now) == compose(memory, reader=everyone, now=now):
            return latest.text, latest.written_at
    return compose(memory, reader=reader), None


def write(memory: Memory) -> Brief:
    """Today's brief, for the household: every member reads it, so it speaks only of what
    every member may read."""
    text, composer = compose(memory, reader=visibility.household(memory)), "offline"
    if llm.configured(memory, "brief"):
        try:
            answer = llm.complete(
                task="brief",
                memory=memory,
                max_tokens=400,
                timeout=BRIEF_TIMEOUT_S,
                system="Rewrite this morning's brief about a home's memory in two or three "
                "warm, plain sentences. Keep every number and quoted fact exactly; add "
                "nothing that is not in it.",
                prompt=text,
            )
            if answer.text.strip():
                text, composer = answer.text.strip(), "anthropic"
        except llm.LLMError as error:
            logger.warning("the brief stays in plain words: %s", error)
    return Brief.objects.create(memory=memory, text=text, composer=composer)


def write_all() -> int:
    written = 0
    for memory in Memory.objects.all():
        write(memory)
        written += 1
    return written
