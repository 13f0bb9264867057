"""The numbers brain shows about a memory's facts and its queue, each counted one way, for one
reader: the Knowledge tab's measurements, the brief, the House page and its chart, the status
API and the admin read these and nothing else, so two places that show a number show the same.

The counts of what waits on a decision (findings, guesses, rules) live a layer up, beside them,
in ``review.counts``, which also gathers every count a page shows into one ``Counts``.

- **known**: the live facts the reader may read (``Fact.objects.live()``: what may be used).
  Facts no longer used — forgotten, superseded, expired — are not counted as known.
- **learned**: facts taught in a period, whatever became of them since (a line corrected the next
  day was still learned that week). "This week" is the calendar week, Monday to Sunday in the
  household's time zone: the House chart's last bar.
- **waiting**: the lines waiting to be filed into the document (the queue's length).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.utils import timezone

from knowledge.models import Fact, Memory
from memory.models import InboxItem


def week_starts(now: datetime | None = None) -> date:
    """The Monday that begins the current week, in the household's time zone."""
    today = timezone.localdate(now or timezone.now())
    return today - timedelta(days=today.weekday())


def start_of(day: date) -> datetime:
    """Midnight at the start of ``day``, in the household's time zone."""
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def facts(memory: Memory, reader):
    """Every fact of ``memory`` that ``reader`` may read, whatever its status."""
    return Fact.objects.for_memory(memory).readable_by(reader)


def known(memory: Memory, reader, *, now: datetime | None = None) -> int:
    return facts(memory, reader).live(now=now).count()


def no_longer_used(memory: Memory, reader, *, now: datetime | None = None) -> int:
    """Facts kept for the record (forgotten, superseded, expired): the admin lists them too."""
    readable = facts(memory, reader)
    return readable.count() - readable.live(now=now).count()


def learned_since(memory: Memory, reader, since: datetime) -> int:
    return facts(memory, reader).filter(created_at__gte=since).count()


def learned_this_week(memory: Memory, reader, *, now: datetime | None = None) -> int:
    return learned_since(memory, reader, start_of(week_starts(now)))


def waiting(memory: Memory, reader):
    """The lines waiting to be filed that ``reader`` may read."""
    return InboxItem.objects.for_memory(memory).pending().readable_by(reader)


def waiting_to_be_filed(memory: Memory, reader) -> int:
    return waiting(memory, reader).count()
