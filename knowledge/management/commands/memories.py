"""`brain memories list` and `brain memories create SLUG --name NAME`: the memories this brain
keeps (a home, an agent, a team), from the terminal. The admin (Memories) does the same.

``--memory SLUG`` lists that memory alone, or names the one to create; ``--as NAME`` lists the
memories that person may read (creating one is for a superuser)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import IntegrityError

from brain.cli import GroupCommand
from knowledge import access
from knowledge.models import Memory
from knowledge.read_layer import reader_for


class Command(GroupCommand):
    help = "List the memories, or create one."
    memory_help = "list: that memory alone; create: the new memory's slug"
    person_help = "list: the memories this person may read; create: only a superuser may"

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        verbs.add_parser("list", help="every memory: slug, name, facts it believes")
        create = verbs.add_parser("create", help="a new, empty memory")
        create.add_argument(
            "slug", nargs="?", default="", help="its short name in addresses (?memory=SLUG)"
        )
        create.add_argument("--name", default="", help="what people see (default: the slug)")

    def handle(self, *args, verb: str, memory: str, person: str, **options) -> None:
        getattr(self, f"do_{verb}")(memory=memory, person=self.chosen_person(person), **options)

    def do_list(self, *, memory: str, person, **_) -> None:
        default = Memory.objects.default()
        listed = Memory.objects.order_by("pk")
        if memory:
            listed = listed.filter(pk=self.chosen_memory(memory).pk)
        if person is not None:
            listed = listed.filter(pk__in=[m.pk for m in access.readable_memories(person)])
        for one in listed:
            facts = one.facts.live()
            count = facts.readable_by(reader_for(person)).count()
            mark = "  (default)" if one.pk == default.pk else ""
            self.stdout.write(f"{one.slug}  {one.name}  {count} facts{mark}")

    def do_create(self, *, slug: str, name: str, memory: str, person, **_) -> None:
        if slug and memory and slug != memory:
            raise CommandError(f"Name the new memory once: {slug!r} or --memory {memory!r}.")
        slug = slug or memory
        if person is not None and not person.is_superuser:
            raise CommandError(f"Only a superuser may create a memory; {person} is not one.")
        made = Memory(slug=slug.strip(), name=(name or slug).strip())
        try:
            made.full_clean()
        except ValidationError as error:
            problems = [f"{field}: {' '.join(m)}" for field, m in error.message_dict.items()]
            raise CommandError("; ".join(problems)) from None
        try:
            made.save()
        except IntegrityError:
            raise CommandError(f"There is already a memory called {slug!r}.") from None
        self.stdout.write(f"Created {made.name} ({made.slug}): open it with ?memory={slug}")
