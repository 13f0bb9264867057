"""`brain reembed`: bring every fact's vector to its memory's embedder now, counting facts as it
goes (the worker does the same in the background after BRAIN_EMBEDDER or a memory's "embed"
route changes). ``--memory SLUG``: that memory's facts alone; ``--as NAME``: only when that
person administers it (without --memory, every memory)."""

from __future__ import annotations

from brain.cli import GroupCommand
from brain.progress import Progress
from knowledge import access, reembedding
from knowledge.models import Memory, Permission


class Command(GroupCommand):
    help = "Re-embed every fact whose vector is missing or from another embedder, now."
    memory_help = "that memory's facts alone (default: every memory's)"
    person_help = "only when this person administers the memory (every memory, without --memory)"

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--seconds",
            type=float,
            default=3600.0,
            help="stop after this long (default an hour); run again to carry on",
        )

    def handle(self, *args, seconds: float, memory: str, person: str, **options) -> None:
        only = self.chosen_memory(memory) if memory else None
        reader = self.chosen_person(person)
        for one in [only] if only else Memory.objects.order_by("pk"):
            access.require(reader, one, Permission.ADMINISTER)
        name = " and ".join(reembedding.names()) or "the embedder"
        stale = reembedding.stale_facts(only).count()
        if not stale:
            self.stdout.write(f"Every fact already has a vector from {name}.")
            return
        skipped: list[str] = []
        progress = Progress(self.stdout, stale, "facts", label=f"Re-embedding with {name}")
        done = reembedding.reembed_stale(
            only=only,
            seconds=seconds,
            on_batch=progress.advance,
            on_skip=lambda memory, why: skipped.append(f"{memory.name}: {why}"),
        )
        left = reembedding.stale_facts(only).count()
        summary = f"Re-embedded {done:,} facts with {name}."
        if left:
            summary += f" {left:,} are still to do: run it again to carry on."
        progress.finish(summary)
        for line in skipped:
            self.stdout.write(f"Left for later, its worker gave no vectors — {line}")
