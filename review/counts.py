"""Counts other parts of brain show, wired in settings (the nav badge, the measurements)."""

from django.http import Http404

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
    try:
        memory = current.memory_of(request)
    except Http404:  # a page saying the memory it names does not exist still has a header
        return 0
    return status.waiting_on_you(memory)
