"""`brain indexes`: give every memory that holds a small share of the facts its own search
indexes now, and drop those no memory should have (beat does one memory every ten minutes;
after importing a large agent memory beside the home's, this does them all at once)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from knowledge import memory_indexes


class Command(BaseCommand):
    help = "Build the search indexes memories should have of their own, and drop the others."

    def handle(self, *args, **options) -> None:
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
