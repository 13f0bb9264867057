"""The terminal's commands as whole processes (one of `make bench`'s BENCHMARKS).

What is timed is what a person waits for at the terminal: from starting `bin/brain memory list`
(or `memory add "…"`) to its exit, Python's start and Django's set-up included. The yardstick,
in the same run, is a bare ``django.setup()`` of the project (``python -c "import django;
django.setup()"`` with brain's settings): what every command must pay before it does anything,
so the ratio is what the command adds. Below that, ``django.setup()`` against a bare ``import
django``: what loading brain's settings and apps costs over Django itself.

The four commands run in turn, round by round (one round first that is not counted), so a
moment when the machine is slower falls on all of them; each ratio is taken round by round and
its median reported. Wall time is what a person waits; CPU time (user + system, the operating
system's account of the finished child) is what the process did, and moves less with other
work on the machine. `memory add` teaches a new sentence each round into a memory of its own
(``bench-cli``, deleted afterwards), through the whole gate: the embedder the settings name
(BRAIN_EMBEDDER), the neighbours, the fact and its inbox item.

Target (the issue's): `memory list` and `memory add` at most 1.3× a bare ``django.setup()``.
``BRAIN_BENCH_CLI_ROUNDS`` sets the number of rounds (15).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings

ROUNDS = int(os.environ.get("BRAIN_BENCH_CLI_ROUNDS", "15"))
TARGET = 1.3
MEMORY = "bench-cli"


@dataclass
class Timed:
    """One command's runs: wall and CPU seconds."""

    label: str
    argv: list[str]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def run(self, env: dict, *, counted: bool = True) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        ran = subprocess.run(self.argv, env=env, capture_output=True, text=True, timeout=120)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if ran.returncode != 0:
            raise RuntimeError(f"{self.label} failed: {(ran.stderr or ran.stdout).strip()[-500:]}")
        if counted:
            self.wall.append(wall)
            self.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def _commands(round_number: int) -> list[Timed]:
    """The four commands of a round (the sentence taught is new each round)."""
    python = sys.executable
    brain = str(settings.BASE_DIR / "bin" / "brain")
    sentence = f"Bench note {round_number}: the green watering can is in shed {round_number}."
    return [
        Timed("import django", [python, "-c", "import django"]),
        Timed("django.setup()", [python, "-c", "import django; django.setup()"]),
        Timed("brain memory list", [brain, "memory", "list", "--memory", MEMORY]),
        Timed("brain memory add", [brain, "memory", "add", sentence, "--memory", MEMORY]),
    ]


def _ratio(over: Timed, under: Timed, times: str) -> float:
    """The median of the round-by-round ratios."""
    return statistics.median(
        a / b for a, b in zip(getattr(over, times), getattr(under, times), strict=True)
    )


def measure(rounds: int | None = None) -> list[Timed]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "brain.settings",
        "PYTHONPATH": str(settings.BASE_DIR),  # python -c finds brain's settings, as manage.py
    }
    timed = _commands(0)
    for command in timed:  # the warm-up round: files in the page cache, bytecode written
        command.run(env, counted=False)
    for number in range(1, (rounds or ROUNDS) + 1):
        for command, this_round in zip(timed, _commands(number), strict=True):
            command.argv = this_round.argv
            command.run(env)
    return timed


def terminal_commands() -> str:
    from knowledge.models import Memory

    Memory.objects.filter(slug=MEMORY).delete()
    memory = Memory.objects.create(slug=MEMORY, name="Terminal benchmark")
    load_before = os.getloadavg()[0]
    try:
        bare, setup, listing, adding = measure()
    finally:
        memory.delete()
    load_after = os.getloadavg()[0]
    return section(bare, setup, listing, adding, load=(load_before, load_after))


def section(
    bare: Timed, setup: Timed, listing: Timed, adding: Timed, *, load: tuple[float, float]
) -> str:
    rows = []
    for command in (bare, setup, listing, adding):
        ratio_wall = _ratio(command, setup, "wall")
        ratio_cpu = _ratio(command, setup, "cpu")
        rows.append(
            f"| {command.label} | {statistics.median(command.wall) * 1000:,.0f} ms | "
            f"{statistics.median(command.cpu) * 1000:,.0f} ms | {ratio_wall:.2f}× | "
            f"{ratio_cpu:.2f}× |"
        )
    verdicts = []
    for command in (listing, adding):
        ratio = _ratio(command, setup, "wall")
        met = "met" if ratio <= TARGET else "**not met**"
        verdicts.append(
            f"- `{command.label}` at most {TARGET}× a bare `django.setup()` (wall, median of "
            f"the rounds' ratios) — {ratio:.2f}× (CPU {_ratio(command, setup, 'cpu'):.2f}×), "
            f"{met}."
        )
    setup_over_bare = _ratio(setup, bare, "wall")
    embedder = settings.BRAIN_EMBEDDER
    return "\n".join(
        [
            "## The terminal: `brain memory list` and `add` against a bare `django.setup()`",
            "",
            f"Each command as a whole process, {len(setup.wall)} rounds in turn after one not "
            "counted, medians; each ratio is taken round by round against `django.setup()` "
            'of the project (`python -c "import django; django.setup()"`) and its median '
            f"given. `memory add` teaches a new sentence each round through the whole gate, "
            f"with the `{embedder}` embedder, into a memory of its own.",
            "",
            "| command | wall p50 | CPU p50 | ÷ django.setup() (wall) | ÷ django.setup() (CPU) |",
            "|---|---:|---:|---:|---:|",
            *rows,
            "",
            f"`django.setup()` is {setup_over_bare:.1f}× a bare `import django` (wall; CPU "
            f"{_ratio(setup, bare, 'cpu'):.1f}×): Python's start and Django's import are in "
            "both; the rest is brain's settings and apps, and Django's own (`contrib.auth`, "
            "`contrib.postgres`, psycopg, pgvector).",
            "",
            "What `memory add` adds is teaching itself: the write gate and what it imports "
            "(numpy, Celery, pydantic, an HTTP client: about half a second of CPU), the "
            "embedder's model (MiniLM's session, loaded on a thread while those are imported), "
            "the statements of a new fact, and its commit. `memory list` reads one row.",
            "",
            f"Load average (1 min) on this machine's {os.cpu_count()} cores: {load[0]:.1f} when "
            f"this benchmark started, {load[1]:.1f} when it ended.",
            "",
            "Targets:",
            "",
            *verdicts,
            "",
        ]
    )


def main() -> None:
    """This section alone, put into docs/BENCHMARKS.md in place of the last one:
    ``manage.py shell -c "from bench.cli import main; main()"``."""
    from pathlib import Path

    output = Path(settings.BASE_DIR) / "docs" / "BENCHMARKS.md"
    made = terminal_commands()
    heading = made.split("\n", 1)[0]
    text = output.read_text() if output.exists() else ""
    if heading in text:
        before, rest = text.split(heading, 1)
        after = rest.split("\n## ", 1)
        text = before + made + ("\n## " + after[1] if len(after) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + made
    output.write_text(text)
    print(made)
