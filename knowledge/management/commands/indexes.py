"""`brain indexes`: give every memory that holds a small share of the facts its own search
indexes now, and drop those no memory should have (beat does one memory every ten minutes;
after importing a large agent memory beside the home's, this does them all at once).

A memory's share of all the facts decides whether it has indexes of its own, so this keeps
every memory's at once and takes no ``--memory``; ``--as NAME`` runs it only for a superuser."""

from __future__ import annotations

from django.core.management.base import CommandError

from brain.cli import GroupCommand
from knowledge import memory_indexes


class Command(GroupCommand):
    help = "Build the search indexes memories should have of their own, and drop the others."
    memory_help = "not taken: every memory's indexes are kept at once"
    person_help = "only when this person is a superuser"

    def handle(self, *args, memory: str, person: str, **options) -> None:
        if memory:
            raise CommandError(
                "brain indexes keeps every memory's own indexes at once (a memory's share of "
                "all the facts decides whether it has them); leave out --memory."
            )
        reader = self.chosen_person(person)
        if reader is not None and not reader.is_superuser:
            raise CommandError(f"Only a superuser may build indexes; {reader} is not one.")
        built: set[int] = set()
        said = False
        while True:
            kept = memory_indexes.keep()
            if kept.busy:
                raise CommandError(kept.message)
            if not kept.built and not kept.dropped:
                break
            self.stdout.write(kept.message)
            said = True
            again = built.intersection(kept.built)
            if again:  # what was built a moment ago is invalid already: never loop on it
                raise CommandError(
                    f"The indexes of memory {min(again)} were built twice in a row; the "
                    "database's log says why."
                )
            built.update(kept.built)
        if not said:
            self.stdout.write(kept.message)
