"""`make demo` / `manage.py demo --memory SLUG`: the demo household, written by hand, loaded
into any memory through the same actions as everything else (``review.demo_household``).
Safe to run twice: the second load adds nothing."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from brain.progress import Progress
from knowledge.models import Memory
from review import demo_household


class Command(BaseCommand):
    help = "Load the demo household (rooms, devices, people and a year of facts) into a memory."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--memory", default="home", help="the memory to fill (made when missing)"
        )

    def handle(self, *args, memory: str, **options) -> None:
        try:
            household = demo_household.read()
        except (OSError, ValueError, KeyError) as error:
            raise CommandError(f"The demo household's data cannot be read: {error}") from None
        home, _ = Memory.objects.get_or_create(slug=memory, defaults={"name": memory.title()})
        progress = Progress(self.stdout, len(household.lines), "lines", label="Teaching")
        loaded = demo_household.load(
            home, household=household, on_line=progress.advance, say=progress.say
        )
        self.stdout.write(loaded.registry_summary)
        progress.finish(loaded.summary() + " Open / to see the house.")
