"""Every count a page shows, in one place, for one reader: the House page and its tiles and
chart, the Knowledge tab's measurements, the brief, the Findings tab and its badge, the status
API and Home Assistant's sensors read these, so no two of them disagree.

The facts and the queue are counted in ``memory.counts`` (a lower layer, which the brief and the
measurements read directly); what waits on a decision is counted here:

- **findings**: open findings (raised by the house checks, not fixed, not "not a problem");
- **guesses**: open guesses (asked and not answered, asleep or expired);
- **waiting on you**: the two together — the Findings tab's one list and its one badge;
- **rules**: the rules a person set that are in force now.

Findings and guesses are the house's: every member of the memory reads them, so they are the
same for every reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import Http404
from django.utils import timezone

from knowledge import current
from knowledge.models import Memory
from memory import counts as facts
from review.models import Finding, Guess, Rule


def open_findings(memory: Memory) -> int:
    return Finding.objects.for_memory(memory).open().count()


def open_guesses(memory: Memory) -> int:
    return Guess.objects.for_memory(memory).open().count()


def waiting_on_you(memory: Memory) -> int:
    """Everything waiting on a decision: open findings and open guesses."""
    return open_findings(memory) + open_guesses(memory)


def rules(memory: Memory) -> int:
    return Rule.objects.for_memory(memory).active().count()


def findings_raised_since(memory: Memory, since: datetime) -> int:
    """Findings first raised since ``since``, whatever became of them."""
    return Finding.objects.for_memory(memory).filter(first_raised_at__gte=since).count()


@dataclass(frozen=True)
class Counts:
    """The numbers one reader is shown about one memory, taken together."""

    known: int
    learned_this_week: int
    waiting_to_be_filed: int
    findings: int
    guesses: int
    rules: int

    @property
    def waiting_on_you(self) -> int:
        return self.findings + self.guesses


def for_reader(memory: Memory, reader, *, now: datetime | None = None) -> Counts:
    now = now or timezone.now()
    return Counts(
        known=facts.known(memory, reader, now=now),
        learned_this_week=facts.learned_this_week(memory, reader, now=now),
        waiting_to_be_filed=facts.waiting_to_be_filed(memory, reader),
        findings=open_findings(memory),
        guesses=open_guesses(memory),
        rules=rules(memory),
    )


def badge(request) -> int:
    """The Findings tab's one badge: everything waiting on a decision."""
    try:
        memory = current.memory_of(request)
    except Http404:  # a page saying the memory it names does not exist still has a header
        return 0
    return waiting_on_you(memory)
