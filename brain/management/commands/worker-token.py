"""``brain worker-token create --memory SLUG --name NAME | list [--memory SLUG] | revoke ID``:
the keys worker programs present (brain/workers.py). The key is printed once, at creation.

The terminal's operator holds the database, so administers every memory (knowledge.access);
``--as NAME`` runs a verb only for a superuser. ``--memory`` goes anywhere on the line.
The module's name is the verb as written in the docs; Django names a command by its file.
"""

from __future__ import annotations

from django.apps import apps
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from brain import workers
from brain.cli import GroupCommand
from brain.models import WorkerToken


def _memory(slug: str):
    Memory = apps.get_model("knowledge", "Memory")  # brain imports no app: by name
    memory = Memory.objects.filter(slug=slug).first()
    if memory is None:
        raise CommandError(f"No memory “{slug}”.")
    return memory


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "never"


class Command(GroupCommand):
    help = "Make, list and revoke the tokens of worker programs (each serves one memory)."

    memory_help = "create: the memory the token serves (required); list: that memory's tokens"
    person_help = "only when this person is a superuser"

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        create = verbs.add_parser(
            "create", help="make a token (--memory SLUG); its key is shown once"
        )
        create.add_argument("--name", required=True, help="the machine it runs on, say")
        verbs.add_parser("list", help="the tokens, with when each was last seen")
        revoke = verbs.add_parser("revoke", help="revoke token ID: its workers are refused")
        revoke.add_argument("id", type=int)

    def handle(self, *args, verb: str, person: str, **options) -> None:
        reader = self.chosen_person(person)
        if reader is not None and not reader.is_superuser:
            raise CommandError(f"Only a superuser may manage worker tokens; {reader} is not one.")
        if verb == "create" and not options["memory"]:
            raise CommandError("Name the memory the token serves: --memory SLUG.")
        getattr(self, f"_{verb}")(**options)

    def _create(self, *, memory: str, name: str, **_) -> None:
        made = workers.create_token(memory=_memory(memory), name=name)
        self.stdout.write(made.message)

    def _list(self, *, memory: str, **_) -> None:
        tokens = workers.list_tokens(_memory(memory) if memory else None)
        if not tokens:
            self.stdout.write("No worker tokens.")
        for token in tokens:
            state = f"revoked {_when(token.revoked_at)}" if token.revoked_at else "active"
            self.stdout.write(
                f"{token.pk:>4}  {token.memory.slug}  {token.name}  {token.prefix}…  {state}, "
                f"made {_when(token.created_at)}, last seen {_when(token.last_seen_at)}"
            )

    def _revoke(self, *, id: int, **_) -> None:
        token = WorkerToken.objects.select_related("memory").filter(pk=id).first()
        if token is None:
            raise CommandError(f"No worker token {id}.")
        self.stdout.write(workers.revoke_token(token).message)
