"""`make bench`: run every benchmark the apps register and write docs/BENCHMARKS.md.

Each entry of settings.BRAIN_BENCHMARKS is a dotted path to a function taking no arguments and
returning a markdown section (a heading, a table, a sentence on what the ratio means). Every
figure is compared with a baseline measured in the same run, so the machine's speed cancels.
`make bench ONLY="gate_quality conversations"` runs the benchmarks whose paths hold those words
and puts their sections in place of the ones of the same heading, keeping every other section
of the file as it was, each replaced one saying when it was measured on its own.
"""

import logging
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
        f"Python {sys.version.split()[0]}"
    )


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
                for path in settings.BRAIN_BENCHMARKS:
                    self._run(path, sections, failed)
                    # Written after each one, so what was measured is kept whatever comes next.
                    Path(output).write_text(header + "\n" + "\n".join(sections))
            finally:
                for cleanup in getattr(settings, "BRAIN_BENCHMARK_CLEANUPS", []):
                    import_string(cleanup)()
        self.stdout.write(f"wrote {output} in {time.monotonic() - started:.0f} s")
        if failed:
            raise CommandError(f"these benchmarks failed (their sections say why): {failed}")

    def _only(self, output: str, words: list[str]) -> None:
        paths = [path for path in settings.BRAIN_BENCHMARKS if any(w in path for w in words)]
        if not paths:
            raise CommandError(
                f"no benchmark's path holds {', '.join(words)}: "
                f"they are {', '.join(settings.BRAIN_BENCHMARKS)}"
            )
        started = time.monotonic()
        failed: list[str] = []
        for path in paths:
            sections: list[str] = []
            self._run(path, sections, failed)
            stamp = (
                f"Measured {timezone.now():%Y-%m-%d %H:%M} UTC on its own, with "
                f'`make bench ONLY="{path}"`, on: {machine()}.\n'
            )
            text = Path(output).read_text() if Path(output).exists() else "# Benchmarks\n"
            if path not in failed:  # an earlier run's failure of it is no longer news
                text = "".join(
                    s for s in _sections_kept(text) if s.partition("\n")[0] != f"## {path}"
                )
            Path(output).write_text(replaced(text, sections[0], stamp))
        self.stdout.write(f"wrote {output} in {time.monotonic() - started:.0f} s")
        if failed:
            raise CommandError(f"these benchmarks failed (their sections say why): {failed}")

    def _run(self, path: str, sections: list[str], failed: list[str]) -> None:
        self.stdout.write(f"running {path} …")
        began = time.monotonic()
        try:
            sections.append(import_string(path)())
        except Exception as error:  # one benchmark's failure loses no other's figures
            logger.exception("benchmark %s failed", path)
            failed.append(path)
            sections.append(f"## {path}\n\nFailed in this run: {error}\n")
        self.stdout.write(f"  {time.monotonic() - began:.0f} s")


_HEADING = re.compile(r"^## .*$", re.MULTILINE)


def replaced(text: str, new: str, stamp: str) -> str:
    """``text`` with each of ``new``'s sections (``## heading`` to the next) in place of the one
    of the same heading, or after the last section; a section a benchmark carries over whole
    (the 1M figures) is left where it is."""
    for section in _sections(new):
        heading, _, body = section.partition("\n")
        section = f"{heading}\n\n{stamp}\n{body.lstrip(chr(10))}".rstrip("\n") + "\n"
        old = next((s for s in _sections(text) if s.partition("\n")[0] == heading), None)
        if old is not None and old.strip() == f"{heading}\n\n{body.lstrip(chr(10))}".strip():
            continue  # carried over whole from an earlier run (the 1M figures): not measured now
        if old is not None:
            text = text.replace(old, section + ("\n" if old.endswith("\n\n") else ""), 1)
        else:
            text = text.rstrip("\n") + "\n\n" + section
    return text


def _sections_kept(text: str) -> list[str]:
    """``text`` cut into its head and its sections, which join back into it."""
    first = _HEADING.search(text)
    head = text[: first.start()] if first else text
    return [head, *_sections(text)]


def _sections(text: str) -> list[str]:
    starts = [match.start() for match in _HEADING.finditer(text)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
