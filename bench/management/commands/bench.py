"""`make bench`: run every benchmark and write docs/BENCHMARKS.md.

Each entry of ``BENCHMARKS`` is a function taking no arguments and returning a markdown section
(a heading, a table, a sentence on what the ratio means), named by its dotted path
(``bench.memory.import_rate``). Every figure is compared with a baseline measured in the same
run, so the machine's speed cancels. `make bench ONLY="gate_quality conversations"` runs the
benchmarks whose paths hold those words and puts their sections in place of the ones of the same
heading, keeping every other section of the file as it was, each replaced one saying when it
was measured on its own.
"""

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from bench import (
    agent,
    cli,
    conversations,
    gate_quality,
    knowledge,
    load,
    memory,
    recall,
    visibility,
    workers,
)
from bench.machine import machine
from bench.sections import heading, split

logger = logging.getLogger(__name__)

# What `make bench` runs, in this order: functions returning a markdown section.
BENCHMARKS: list[Callable[[], str]] = [
    memory.offline_composer,
    # Labelled questions over small memories of their own: before the 100k household, whose
    # rows every vector search would walk past.
    recall.recall_quality,
    # These four read one 100k household (bench.knowledge.shared_household); intake writes
    # into it, so it comes last of them.
    knowledge.recall_at_scale,
    memory.knowledge_tab_at_scale,
    agent.session_start_hook,
    knowledge.intake_through_the_gate,
    memory.import_rate,
    memory.bulk_adds,
    gate_quality.gate_quality,
    # Conversations taught through learn, and through the API (bulk adds, posted, reflected).
    conversations.conversations_through_learn,
    conversations.conversations_through_the_api,
    # A model call through a worker program against the same stub model asked directly.
    workers.worker_round_trip,
    # The read rules (labels and roles) at 100k facts (BRAIN_BENCH_RULE_FACTS).
    visibility.read_rules,
    # gunicorn and a worker under 50 writers and 5 readers (BRAIN_BENCH_LOAD_SECONDS, 120).
    load.production_server_under_load,
    # The terminal's commands as whole processes against a bare django.setup().
    cli.terminal_commands,
]
# Run after the benchmarks, whatever happened to them: what they shared is deleted.
CLEANUPS: list[Callable[[], None]] = [knowledge.release_shared]


def path_of(benchmark: Callable) -> str:
    """A benchmark's name: its dotted path (``bench.memory.import_rate``)."""
    return f"{benchmark.__module__}.{benchmark.__qualname__}"


class Command(BaseCommand):
    help = "Run the benchmarks and write docs/BENCHMARKS.md."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", default=str(settings.BASE_DIR / "docs" / "BENCHMARKS.md"))
        parser.add_argument(
            "--only",
            nargs="+",
            default=[],
            metavar="WORD",
            help="run only the benchmarks whose dotted path holds one of these words, and "
            "replace their sections in the file, keeping the others",
        )

    def handle(self, *args, output: str, only: list[str], **options) -> None:
        if only:
            return self._only(output, only)
        started = time.monotonic()
        sections: list[str] = []
        failed: list[str] = []
        header = (
            "# Benchmarks\n\n"
            f"Measured {timezone.now():%Y-%m-%d %H:%M} UTC with `make bench` on: {machine()}.\n"
            "Every figure is compared with a baseline measured in the same run, as a ratio.\n"
        )
        # The file as it was, for a benchmark that carries a section of an earlier run over
        # (`make bench SIZES=1m`'s): the loop below rewrites the file after each benchmark.
        before = Path(output).read_text() if Path(output).exists() else ""
        with tempfile.NamedTemporaryFile("w", suffix=".md", prefix="benchmarks-") as kept:
            kept.write(before)
            kept.flush()
            os.environ["BRAIN_BENCH_PREVIOUS"] = kept.name
            try:
                for benchmark in BENCHMARKS:
                    self._run(benchmark, sections, failed)
                    # Written after each one, so what was measured is kept whatever comes next.
                    Path(output).write_text(header + "\n" + "\n".join(sections))
            finally:
                for cleanup in CLEANUPS:
                    cleanup()
        self.stdout.write(f"wrote {output} in {time.monotonic() - started:.0f} s")
        if failed:
            raise CommandError(f"these benchmarks failed (their sections say why): {failed}")

    def _only(self, output: str, words: list[str]) -> None:
        chosen = [b for b in BENCHMARKS if any(word in path_of(b) for word in words)]
        if not chosen:
            raise CommandError(
                f"no benchmark's path holds {', '.join(words)}: "
                f"they are {', '.join(path_of(b) for b in BENCHMARKS)}"
            )
        started = time.monotonic()
        failed: list[str] = []
        for benchmark in chosen:
            path = path_of(benchmark)
            sections: list[str] = []
            self._run(benchmark, sections, failed)
            stamp = (
                f"Measured {timezone.now():%Y-%m-%d %H:%M} UTC on its own, with "
                f'`make bench ONLY="{path}"`, on: {machine()}.\n'
            )
            text = Path(output).read_text() if Path(output).exists() else "# Benchmarks\n"
            if path not in failed:  # an earlier run's failure of it is no longer news
                text = "".join(s for s in split(text) if heading(s) != f"## {path}")
            Path(output).write_text(replaced(text, sections[0], stamp))
        self.stdout.write(f"wrote {output} in {time.monotonic() - started:.0f} s")
        if failed:
            raise CommandError(f"these benchmarks failed (their sections say why): {failed}")

    def _run(self, benchmark: Callable[[], str], sections: list[str], failed: list[str]) -> None:
        path = path_of(benchmark)
        self.stdout.write(f"running {path} …")
        began = time.monotonic()
        try:
            sections.append(benchmark())
        except Exception as error:  # one benchmark's failure loses no other's figures
            logger.exception("benchmark %s failed", path)
            failed.append(path)
            sections.append(f"## {path}\n\nFailed in this run: {error}\n")
        self.stdout.write(f"  {time.monotonic() - began:.0f} s")


def replaced(text: str, new: str, stamp: str) -> str:
    """``text`` with each of ``new``'s sections (``## heading`` to the next) in place of the one
    of the same heading, or after the last section; a section a benchmark carries over whole
    (the 1M figures) is left where it is."""
    for section in split(new)[1:]:
        title, _, body = section.partition("\n")
        section = f"{title}\n\n{stamp}\n{body.lstrip(chr(10))}".rstrip("\n") + "\n"
        old = next((s for s in split(text)[1:] if heading(s) == title), None)
        if old is not None and old.strip() == f"{title}\n\n{body.lstrip(chr(10))}".strip():
            continue  # carried over whole from an earlier run (the 1M figures): not measured now
        if old is not None:
            text = text.replace(old, section + ("\n" if old.endswith("\n\n") else ""), 1)
        else:
            text = text.rstrip("\n") + "\n\n" + section
    return text
