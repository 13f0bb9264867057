"""This morning's brief: what brain learned, what waits, what changed, in a few sentences.

Written daily by beat. The wording is computed here from the numbers; when a model is
configured it may rewrite those sentences more naturally, never adding a fact of its own.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from brain import llm
from brain.words import counted, quoted, sentence, unnested
from knowledge import visibility
from knowledge.models import Memory
from memory import counts
from memory.models import Brief, Change

logger = logging.getLogger(__name__)
WINDOW = timedelta(days=1)
BRIEF_TIMEOUT_S = 30.0
REWRITE: llm.Task[Any] = llm.Task(  # its answer is plain text
    "brief",
    "Rewrite this morning's brief about a home's memory in two or three warm, plain "
    "sentences. Keep every number and quoted fact exactly; add nothing that is not in it.",
    max_tokens=400,
    timeout=BRIEF_TIMEOUT_S,
)


def compose(memory: Memory, *, reader, now=None) -> str:
    """The brief in plain words, from the last day's numbers as ``reader`` may count them
    (``memory.counts``: the numbers the House page and the Knowledge tab show beside it)."""
    now = now or timezone.now()
    since = now - WINDOW
    learned = counts.facts(memory, reader).filter(created_at__gte=since)
    learned_count = learned.count()
    latest = learned.order_by("-created_at", "-pk").first()
    waiting = counts.waiting_to_be_filed(memory, reader)
    changes = Change.objects.for_memory(memory).filter(created_at__gte=since)
    change_count = changes.count()
    last_change = changes.order_by("-number").first()
    sentences = []
    if learned_count:
        sentences.append(
            f"Since yesterday brain learned {counted(learned_count, 'fact')}, most "
            f"recently {quoted(latest.text.rstrip('.'))}."
        )
    else:
        sentences.append("Nothing new was learned since yesterday.")
    if waiting:
        sentences.append(
            f"{counted(waiting, 'line')} {'waits' if waiting == 1 else 'wait'} to "
            "be filed into the memory document."
        )
    else:
        sentences.append("Nothing is waiting to be filed.")
    if change_count:
        assert last_change is not None  # the newest of the changes counted
        sentences.append(
            sentence(
                f"The document changed {counted(change_count, 'time')}; the last: "
                f"{unnested(last_change.summary)}"
            )
        )
    return " ".join(sentences)


_NUMBER = re.compile(r"\d[\d,]*")


def _numbers(text: str) -> list[str]:
    return sorted(number.replace(",", "") for number in _NUMBER.findall(text))


def for_today(memory: Memory, reader) -> tuple[str, datetime | None]:
    """What a page shows ``reader`` as this morning's brief, and when it was written.

    Today's written brief (written for the household, perhaps in a model's words) while every
    number it states is still the number now, and the reader counts as the household does;
    otherwise the same sentences composed now from the reader's own numbers (written_at None),
    so the brief never says "5 lines wait" beside a tile saying 1."""
    now_said = compose(memory, reader=reader)
    latest = Brief.objects.latest_for(memory)
    if latest and timezone.localtime(latest.written_at).date() == timezone.localdate():
        everyone = visibility.household(memory)
        still_true = _numbers(latest.text) == _numbers(now_said)
        if still_true and now_said == compose(memory, reader=everyone):
            return latest.text, latest.written_at
    return now_said, None


def write(memory: Memory) -> Brief:
    """Today's brief, for the household: every member reads it, so it speaks only of what
    every member may read."""
    text, composer = compose(memory, reader=visibility.household(memory)), "offline"
    if REWRITE.configured(memory):
        try:
            answer = REWRITE.complete(text, memory=memory)
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
