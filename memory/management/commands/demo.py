"""`make demo`: a realistic household — the seed's example lines and about two hundred more,
filed into the document, a few still waiting, a short change log and this morning's brief."""

from __future__ import annotations

import random
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from knowledge import registry
from knowledge.models import Fact, Memory
from memory import actions, brief, consolidator, revisions
from memory.demo import SEED_LINES, household_facts
from memory.models import ConsolidationRun, DocumentRevision, Origin

HOUSE = Path(__file__).resolve().parents[2] / "fixtures" / "demo-house.yaml"
EXTRA_FACTS = 200
LEFT_WAITING = [
    "The garage freezer is off in winter.",
    "Guests use the loft when they stay over Christmas.",
    "Mia's bedtime moved to 19:30 on school nights.",
    "The hall sensor's battery is at 12%.",
    "The conservatory blind sticks halfway when it is below 5 degrees.",
]
FAILURES = [
    "Turning the heat pump off overnight made the morning warm-up take three hours.",
    "Automating the porch light on sunset alone left it on all night in summer.",
]


class Command(BaseCommand):
    help = "Load a realistic demo household into an empty memory."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memory", default="home", help="the memory to fill (must be empty)")

    def handle(self, *args, memory: str, **options) -> None:
        home, _ = Memory.objects.get_or_create(slug=memory, defaults={"name": memory.title()})
        if Fact.objects.for_memory(home).exists():
            raise CommandError(
                f"{home.name} already has facts; the demo fills an empty memory "
                "(try --memory demo)."
            )
        people = self._people()
        self.stdout.write(registry.load_file(memory=home, path=HOUSE).summary())
        rng = random.Random(11)
        origins = [Origin.VOICE, Origin.CHAT, Origin.TYPED, Origin.TERMINAL, Origin.INSIGHT]
        for lines in SEED_LINES.values():
            for line in lines:
                actions.learn(
                    memory=home, text=line, origin=Origin.TYPED, by=people[0], confidence="high"
                )
        for text in FAILURES:
            actions.learn(memory=home, text=text, origin=Origin.INSIGHT, outcome=False)
        for text in household_facts(EXTRA_FACTS, seed=5):
            actions.learn(
                memory=home, text=text, origin=rng.choice(origins), by=rng.choice([*people, None])
            )
        self._file(home)
        current = DocumentRevision.objects.current(home)
        revisions.save_user_edit(
            memory=home,
            base_generation=current.generation,
            by=people[0],
            text=current.text.replace(
                "# Memory\n",
                "# Memory\n\nOur house since 2019. The notes "
                "below are brain's; the ones in my words are mine.\n",
                1,
            ),
        )
        for text in LEFT_WAITING:
            actions.learn(memory=home, text=text, origin=Origin.VOICE, by=people[1])
        brief.write(home)
        facts = Fact.objects.for_memory(home).live().count()
        self.stdout.write(
            f"{home.name}: {facts} facts known, {len(LEFT_WAITING)} waiting to be "
            "filed. Open /knowledge/ to see them."
        )

    def _people(self) -> list:
        User = get_user_model()
        people = []
        for name in ("sarah", "tom"):
            user, created = User.objects.get_or_create(username=name)
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            people.append(user)
        return people

    def _file(self, home: Memory) -> None:
        request = consolidator.request_consolidation(
            memory=home, trigger=ConsolidationRun.Trigger.CLI, send=False
        )
        consolidator.execute(request.run.pk)
        run = ConsolidationRun.objects.get(pk=request.run.pk)
        self.stdout.write(run.outcome)
