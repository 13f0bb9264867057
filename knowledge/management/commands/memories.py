"""`brain memories list` and `brain memories create SLUG --name NAME`: the memories this brain
keeps (a home, an agent, a team), from the terminal. The admin (Memories) does the same."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import IntegrityError

from knowledge.models import Memory


class Command(BaseCommand):
    help = "List the memories, or create one."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        verbs.add_parser("list", help="every memory: slug, name, facts it believes")
        create = verbs.add_parser("create", help="a new, empty memory")
        create.add_argument("slug", help="its short name in addresses (?memory=SLUG) and --memory")
        create.add_argument("--name", default="", help="what people see (default: the slug)")

    def handle(self, *args, verb: str, **options) -> None:
        getattr(self, f"do_{verb}")(**options)

    def do_list(self, **_) -> None:
        default = Memory.objects.default()
        for memory in Memory.objects.order_by("pk"):
            facts = memory.facts.live().count()
            mark = "  (default)" if memory.pk == default.pk else ""
            self.stdout.write(f"{memory.slug}  {memory.name}  {facts} facts{mark}")

    def do_create(self, *, slug: str, name: str, **_) -> None:
        memory = Memory(slug=slug.strip(), name=(name or slug).strip())
        try:
            memory.full_clean()
        except ValidationError as error:
            problems = [f"{field}: {' '.join(m)}" for field, m in error.message_dict.items()]
            raise CommandError("; ".join(problems)) from None
        try:
            memory.save()
        except IntegrityError:
            raise CommandError(f"There is already a memory called {slug!r}.") from None
        self.stdout.write(f"Created {memory.name} ({memory.slug}): open it with ?memory={slug}")
