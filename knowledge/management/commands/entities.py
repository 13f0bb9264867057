"""`brain entities …`: the house's rooms, devices and people (the entity registry).

    brain entities load house.yaml [--partial]   a registry file (format: knowledge/registry.py)
    brain entities sync-ha                        from Home Assistant (HA_URL, HA_TOKEN)
    brain entities list                           what brain knows the house has

Each takes ``--memory SLUG`` and ``--as NAME`` anywhere on the line (load and sync-ha need
curate, list read). Every refusal is one line on stderr and a non-zero exit; nothing
is half-written.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from brain.cli import GroupCommand
from brain.progress import Progress
from knowledge import access, actions, registry
from knowledge.models import Permission, Subject

KIND_ORDER = {kind: index for index, kind in enumerate(registry.KIND_ORDER)}
NEEDS = {"load": Permission.CURATE, "sync-ha": Permission.CURATE, "list": Permission.READ}


class Command(GroupCommand):
    help = "Load, sync and list the house's rooms, devices and people."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        load = verbs.add_parser("load", help="load a JSON or YAML registry file")
        load.add_argument("file")
        load.add_argument(
            "--partial",
            action="store_true",
            help="add and update only: devices the file leaves out are not marked gone",
        )
        verbs.add_parser("sync-ha", help="sync from Home Assistant (HA_URL and HA_TOKEN)")
        verbs.add_parser("list", help="the rooms, devices and people brain knows")

    def handle(self, *args, verb: str, memory: str, person: str, **options) -> None:
        self.memory = self.chosen_memory(memory)
        try:
            access.require(self.chosen_person(person), self.memory, NEEDS[verb])
            getattr(self, f"do_{verb.replace('-', '_')}")(**options)
        except (registry.RegistryError, access.NotPermitted) as error:
            raise CommandError(str(error)) from None

    def do_load(self, *, file: str, partial: bool, **_) -> None:
        report = registry.load_file(memory=self.memory, path=file, partial=partial)
        self.stdout.write(report.summary())

    def do_sync_ha(self, **_) -> None:
        if not (settings.HA_URL and settings.HA_TOKEN):
            raise CommandError(
                "Set HA_URL (such as http://homeassistant.local:8123) and HA_TOKEN "
                "(a long-lived access token) first."
            )
        progress = Progress(self.stdout, 0, "entities", label="Syncing")
        report = registry.sync_home_assistant(
            memory=self.memory, url=settings.HA_URL, token=settings.HA_TOKEN, progress=progress
        )
        progress.finish(report.summary())

    def do_list(self, **_) -> None:
        subjects = sorted(
            Subject.objects.as_system("the house's entities, kept in step")
            .for_memory(self.memory)
            .select_related("room"),
            key=lambda s: (not s.present, KIND_ORDER[s.kind], s.name.casefold()),
        )
        if not subjects:
            self.stdout.write(
                "No rooms, devices or people yet: run `brain entities load FILE` "
                "or `brain entities sync-ha`."
            )
            return
        for subject in subjects:
            self.stdout.write(_line(subject))
        gone = sum(not subject.present for subject in subjects)
        self.stdout.write(f"{len(subjects) - gone} in the house, {gone} gone.")


def _line(subject: Subject) -> str:
    parts = [f"{subject.kind:<7} {subject.name}"]
    if subject.entity_id:
        parts.append(subject.entity_id)
    if subject.room is not None:
        parts.append(f"in {subject.room.name}")
    if subject.aliases:
        parts.append(f"aka {', '.join(subject.aliases)}")
    if not subject.present and subject.removed_at is not None:
        purge = timezone.localdate(subject.removed_at + actions.REMOVED_SUBJECT_GRACE)
        parts.append(f"(gone; its facts are deleted on {purge:%Y-%m-%d} unless it returns)")
    return "  ".join(parts)
