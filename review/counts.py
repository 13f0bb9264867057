"""Counts other parts of brain show, wired in settings (the nav badge, the measurements)."""

from knowledge import current
from knowledge.models import Memory
from review import status
from review.models import Guess, Rule


def open_guesses(memory: Memory) -> int:
    return Guess.objects.for_memory(memory).open().count()


def rules(memory: Memory) -> int:
    return Rule.objects.for_memory(memory).active().count()


def badge(request) -> int:
    """The Findings tab's one badge: everything waiting on a decision."""
    return status.waiting_on_you(current.memory_of(request))
