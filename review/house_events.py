"""House events: an entity changed state, by hand or by an automation, when, and who.

Home Assistant posts them (``POST /api/events/``) one at a time or in batches; insight runs
read them (``review/insight.py``). Everything is checked before anything is stored, and a batch
is stored whole or not at all:

- ``entity_id`` is a Home Assistant entity id (``domain.object_id``: lower-case letters, digits
  and underscores), at most 255 characters;
- ``state`` (and ``from_state``, optional) at most STATE_MAX characters: a state is a word or a
  number ("on", "heat", "21.5"), not a paragraph;
- ``cause`` is ``by_hand`` or ``automation``; ``who`` (optional) names the person or the
  automation, at most 150 characters;
- ``at`` is an ISO 8601 moment, no more than FUTURE_SLACK ahead of now (clocks drift a little,
  not an hour) and no older than KEPT_FOR (it would be removed at once);
- ``id`` (optional, at most 100 characters) is the sender's own id for the event: posting the
  same event twice keeps it once, so a retried batch is harmless.

Bounded: at most BATCH_AT_MOST events a request (Home Assistant sends a few a minute; a day's
catch-up of a busy house is a few hundred), and events are kept KEPT_FOR, the window an insight
run reads (``insight.WINDOW``) with room to spare, then removed by ``remove_old`` on beat.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from brain import inputs
from brain.words import counted
from knowledge.models import Memory, Subject
from review.models import HouseEvent

BATCH_AT_MOST = 500
STATE_MAX = 100
WHO_MAX = 150
REFERENCE_MAX = 100
FUTURE_SLACK = timedelta(minutes=5)
KEPT_FOR = timedelta(days=60)
REMOVED_AT_MOST = 10_000  # rows one clean-up deletes: the next beat takes the rest

ENTITY_ID = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z0-9_]+$")
FIELDS = frozenset({"entity_id", "state", "from_state", "cause", "who", "at", "id"})


@dataclass(frozen=True)
class Received:
    """What a post stored: the new events, and how many were already kept (sent before)."""

    events: list[HouseEvent]
    duplicates: int

    @property
    def message(self) -> str:
        stored = len(self.events)
        text = f"Kept {counted(stored, 'event')}."
        if self.duplicates:
            text += f" {self.duplicates} had been sent before and were kept once."
        return text


def _text(event: Mapping[str, Any], name: str, *, limit: int, where: str, required=True) -> str:
    value = event.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValidationError(f"{where}: “{name}” must be text.")
    value = " ".join(str(value).split())
    if required and not value:
        raise ValidationError(f"{where}: “{name}” is required.")
    if len(value) > limit:
        raise ValidationError(
            f"{where}: “{name}” is {len(value):,} characters; the limit is {limit:,}."
        )
    return inputs.clean_text(name, value)


def _moment(event: Mapping[str, Any], where: str, now: datetime) -> datetime:
    raw = event.get("at")
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError(
            f"{where}: “at” is required, an ISO 8601 time such as 2026-11-30T06:10:00+00:00."
        )
    at = inputs.moment(raw.strip())
    if at is None:
        raise ValidationError(f"{where}: “at” ({raw[:40]!r}) is not an ISO 8601 time.")
    if at > now + FUTURE_SLACK:
        raise ValidationError(f"{where}: “at” is in the future ({raw[:40]}).")
    if at < now - KEPT_FOR:
        raise ValidationError(
            f"{where}: “at” is more than {KEPT_FOR.days} days ago; events are kept "
            f"{KEPT_FOR.days} days."
        )
    return at


def _checked(event: Any, where: str, now: datetime) -> dict[str, Any]:
    if not isinstance(event, Mapping):
        raise ValidationError(f"{where}: an event is an object with entity_id, state, cause, at.")
    unknown = sorted(set(event) - FIELDS)
    if unknown:
        raise ValidationError(
            f"{where}: unknown field{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(name[:40]) for name in unknown[:5])}; "
            f"an event has {', '.join(sorted(FIELDS))}."
        )
    entity_id = _text(event, "entity_id", limit=255, where=where).lower()
    if not ENTITY_ID.match(entity_id):
        raise ValidationError(
            f"{where}: “entity_id” ({entity_id[:60]!r}) is not a Home Assistant entity id "
            "such as light.hall."
        )
    cause = _text(event, "cause", limit=20, where=where)
    if cause not in HouseEvent.Cause.values:
        raise ValidationError(
            f"{where}: “cause” must be {' or '.join(HouseEvent.Cause.values)}, not {cause!r}."
        )
    return {
        "entity_id": entity_id,
        "state": _text(event, "state", limit=STATE_MAX, where=where),
        "from_state": _text(event, "from_state", limit=STATE_MAX, where=where, required=False),
        "cause": cause,
        "who": _text(event, "who", limit=WHO_MAX, where=where, required=False),
        "at": _moment(event, where, now),
        "reference": _text(event, "id", limit=REFERENCE_MAX, where=where, required=False),
    }


def check(body: Any, *, now: datetime | None = None) -> list[dict[str, Any]]:
    """The events in ``body`` (one event, a list, or ``{"events": [...]}``), checked; raises
    ValidationError naming the event and the field."""
    now = now or timezone.now()
    if isinstance(body, Mapping) and "events" in body:
        if set(body) != {"events"}:
            raise ValidationError('Send either one event or {"events": [...]}, not both.')
        body = body["events"]
    events: Sequence[Any] = body if isinstance(body, list) else [body]
    if not events:
        raise ValidationError("No events: send at least one.")
    if len(events) > BATCH_AT_MOST:
        raise ValidationError(
            f"{len(events):,} events in one request; the limit is {BATCH_AT_MOST:,}. "
            "Send them in smaller batches."
        )
    single = len(events) == 1
    return [
        _checked(event, "The event" if single else f"Event {number}", now)
        for number, event in enumerate(events, start=1)
    ]


def record(*, memory: Memory, body: Any, now: datetime | None = None) -> Received:
    """Check and store the events in ``body``; an event sent before (same ``id``) is kept
    once. All or nothing: one bad event stores none of the batch. The same batch posted twice
    at the same moment: one post stores it, the other finds it stored (it tries again once)."""
    events = check(body, now=now)
    subjects = dict(
        Subject.objects.as_system("the subjects house events name")
        .for_memory(memory)
        .filter(entity_id__in={event["entity_id"] for event in events})
        .values_list("entity_id", "pk")
    )
    try:
        return _store(memory, events, subjects)
    except IntegrityError:  # another post stored one of these ids a moment ago
        return _store(memory, events, subjects)


def _store(memory: Memory, events: list[dict[str, Any]], subjects: dict[str, int]) -> Received:
    references = {event["reference"] for event in events if event["reference"]}
    with transaction.atomic():
        seen = set(
            HouseEvent.objects.for_memory(memory)
            .filter(reference__in=references)
            .values_list("reference", flat=True)
        )
        rows, duplicates = [], 0
        for event in events:
            reference = event["reference"]
            if reference and reference in seen:
                duplicates += 1
                continue
            if reference:
                seen.add(reference)
            rows.append(
                HouseEvent(memory=memory, subject_id=subjects.get(event["entity_id"]), **event)
            )
        created = HouseEvent.objects.bulk_create(rows)
    return Received(created, duplicates)


def remove_old(*, now: datetime | None = None) -> int:
    """Remove events older than KEPT_FOR, at most REMOVED_AT_MOST at a time."""
    cutoff = (now or timezone.now()) - KEPT_FOR
    old = HouseEvent.objects.filter(at__lt=cutoff).values_list("pk", flat=True)[:REMOVED_AT_MOST]
    deleted, _ = HouseEvent.objects.filter(pk__in=list(old)).delete()
    return deleted
