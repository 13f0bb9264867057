"""Recording episodes and handing them to the beliefs they become (the model:
``knowledge.models.Episode``).

Rules:

- An episode is refused, never trimmed or guessed at, when it is empty, longer than
  MAX_EPISODE_CHARS, or holds a secret: it is distilled into beliefs that are replayed into
  prompts, so a secret kept once would be repeated for ever.
- Once written, nothing changes an episode's words, outcome or time. ``claim`` sets
  ``distilled_at`` once, with a conditional UPDATE, so two passes never distil one episode twice.
- A belief cites its episodes and their restatements (episodes recorded as saying what a
  waiting one says): ``with_restatements``.

They are here, below the memory app, because the write gate (``memory.actions.learn``) and the
MCP server's ``memory_write`` record and claim them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.core.exceptions import ValidationError
from django.utils import timezone

from knowledge import statements
from knowledge.models import Episode, Memory, name_of
from knowledge.secret_filter import refuse_secrets

# A raw event is a few sentences: longer than one fact (a sentence or two, 1,000 characters),
# short enough that a sleep pass of fifty of them fits one model prompt.
MAX_EPISODE_CHARS = 2000

OUTCOMES = tuple(Episode.Outcome.values)  # ok, fail, unknown


def clean(text: str | None) -> str:
    """The text of an episode as it will be stored, or ValidationError naming the problem."""
    text = statements.as_stored_within(
        text,
        MAX_EPISODE_CHARS,
        what="episode",
        empty="An episode can't be empty: say what happened.",
        advice="Record what happened in a few sentences.",
    )
    refuse_secrets(text)
    return text


def check_outcome(value) -> str:
    """``ok``, ``fail`` or ``unknown`` (None and "" are unknown). Anything else, "success" and
    "failure" included, is refused rather than guessed at."""
    if value is None or value == "":
        return Episode.Outcome.UNKNOWN
    if isinstance(value, str) and value in OUTCOMES:
        return value
    raise ValidationError(f"outcome must be one of ok, fail or unknown, not {value!r}.")


def outcome_word(outcome: bool | None) -> str:
    """A fact's outcome (True, False, None) as an episode's word."""
    words: dict[bool | None, str] = {True: Episode.Outcome.OK, False: Episode.Outcome.FAIL}
    return words.get(outcome, Episode.Outcome.UNKNOWN)


def record(
    *,
    memory: Memory,
    text: str,
    outcome: str,
    by=None,
    occurred_at: datetime | None = None,
    restates: Episode | None = None,
    distilled: bool = False,
    embedding: list[float] | None = None,
    embedder: str = "",
) -> Episode:
    """Append one episode. ``distilled``: it needs no sleep pass (it was learned as it was
    written, or it restates a waiting episode and is distilled with that one)."""
    text = clean(text)
    now = timezone.now()
    return Episode.objects.create(
        memory=memory,
        text=text,
        normalized=statements.normalise(text),
        outcome=check_outcome(outcome),
        occurred_at=occurred_at or now,
        recorded_by=by,
        recorded_by_name=name_of(by),
        restates=restates,
        distilled_at=now if distilled else None,
        embedding=embedding,
        embedder=embedder if embedding is not None else "",
        created_at=now,
    )


def claim(episodes: Iterable[Episode]) -> list[Episode]:
    """Mark ``episodes`` distilled; returns the ones this call claimed (another pass may have
    taken some first). Run it in the transaction that writes what they became."""
    wanted = [episode.pk for episode in episodes]
    if not wanted:
        return []
    now = timezone.now()
    claimed = list(
        Episode.objects.filter(pk__in=wanted, distilled_at__isnull=True)
        .select_for_update(skip_locked=True)
        .values_list("pk", flat=True)
    )
    Episode.objects.filter(pk__in=claimed, distilled_at__isnull=True).update(distilled_at=now)
    by_pk = {episode.pk: episode for episode in episodes}
    for pk in claimed:
        by_pk[pk].distilled_at = now
    return [by_pk[pk] for pk in wanted if pk in claimed]


def with_restatements(episodes: Iterable[Episode]) -> list[Episode]:
    """``episodes`` and every episode recorded as restating one of them, in time order."""
    episodes = list(episodes)
    if not episodes:  # most statements: no query to build
        return []
    found = {episode.pk: episode for episode in episodes}
    for episode in Episode.objects.filter(restates__in=[e.pk for e in episodes]):
        found.setdefault(episode.pk, episode)
    return sorted(found.values(), key=lambda e: (e.occurred_at, e.pk))
