"""`make demo` / `manage.py demo --memory SLUG`: the demo household, written by hand, loaded
into any memory through the same actions as everything else (``review.demo_household``).
Safe to run twice: the second load adds nothing."""

from __future__ import annotations

from django.core.management.base import CommandError

from brain.cli import GroupCommand
from brain.progress import Progress
from knowledge import access
from knowledge.models import Memory, Permission
from review import demo_household


class Command(GroupCommand):
    help = "Load the demo household (rooms, devices, people, a year of facts) into a memory."
    memory_help = "the memory to fill (default: home; made when missing)"
    person_help = "only when this person administers that memory"

    def memory_default(self) -> str:
        return "home"

    def handle(self, *args, memory: str, person: str, **options) -> None:
        reader = self.chosen_person(person)
        try:
            household = demo_household.read()
        except (OSError, ValueError, KeyError) as error:
            raise CommandError(f"The demo household's data cannot be read: {error}") from None
        home = Memory.objects.filter(slug=memory).first()
        if reader is not None and not (
            reader.is_superuser if home is None else access.may(reader, home, Permission.ADMINISTER)
        ):
            raise CommandError(f"{reader} does not administer {memory!r}; nothing was loaded.")
        if home is None:
            home = Memory.objects.create(slug=memory, name=memory.title())
        progress = Progress(self.stdout, len(household.lines), "lines", label="Teaching")
        loaded = demo_household.load(
            home, household=household, on_line=progress.advance, say=progress.say
        )
        self.stdout.write(loaded.registry_summary)
        progress.finish(loaded.summary() + " Open / to see the house.")
