"""The SessionStart hook as a whole process (one of `make bench`'s BENCHMARKS), side by
side with brainmem 0.3.0's `brainmem context` over the same facts.

What is timed is what a person waits for before a session's first turn: from spawning the hook
command exactly as `brain agent install` writes it (through ``/bin/sh``, the payload on stdin)
to its exit with the block printed. Ours asks a running server (`manage.py runserver`, as `make
run` serves) holding 100k live facts: the synthetic household the recall benchmark made
(``bench.knowledge.shared_household``, read before intake writes into it), in a memory of its
own. brainmem is installed from
PyPI into a venv of its own under var/ (never a dependency of brain), its SQLite store loaded
with the same texts, confidences and support; it embeds with its default hash embedder and scans
every live vector per query, as shipped. Both get the same goals, interleaved round by round,
so load on the machine hits both alike. A third row is the floor any Python hook pays:
``python -I -S -c pass``.

Target: p50 under 300 ms at 100k live facts (the issue's; a person notices a pause past about
a third of a second). ``BRAIN_BENCH_HOOK_FACTS`` sets a smaller size while developing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings

from agent import hooks, install
from bench import brainmem
from bench import knowledge as knowledge_bench
from bench.serving import Served, free_port
from knowledge.models import Fact

FACTS = int(os.environ.get("BRAIN_BENCH_HOOK_FACTS", "100000"))
ROUNDS = 30
TARGET_MS = 300
BUDGET = 600


def _size(count: int) -> str:
    return f"{count // 1000}k" if count >= 1000 else str(count)


def _ms(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def _timed_process(command, *, stdin: str = "", env: dict | None = None, shell=False):
    started = time.perf_counter()
    ran = subprocess.run(
        command, shell=shell, input=stdin, capture_output=True, text=True, env=env, timeout=60
    )
    return time.perf_counter() - started, ran


def _runserver() -> Served:
    """`manage.py runserver` on a free loopback port, as `make dev` serves brain; a refused
    sign-in at /api/context is its answer (healthz would wait on Valkey)."""
    url = f"http://127.0.0.1:{free_port()}"
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    argv = [sys.executable, manage, "runserver", url.removeprefix("http://"), "--noreload"]
    return Served([*argv, "--skip-checks"], url=url, probe="/api/context")


def _payload(goal: str, cwd: str) -> str:
    return json.dumps(
        {
            "session_id": "bench",
            "transcript_path": "/dev/null",
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "SessionStart",
            "source": "startup",
            "goal": goal,
        }
    )


def session_start_hook() -> str:
    """Our SessionStart hook and brainmem's `context` as whole processes at FACTS live facts."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    load_before = os.getloadavg()[0]
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
    token, made_token = Token.objects.get_or_create(user=user)
    cli, why_not = brainmem.brainmem_cli()
    try:
        # Read only, so the household the run shares: generating one of its own took 40 s.
        household = knowledge_bench.shared_household(FACTS)
        slug = household.memory.slug
        goals = knowledge_bench.questions(household, seed=11).texts[:ROUNDS]
        # The server's answer alone is timed on goals of its own: asked the hook's goal again,
        # the database would answer from pages the hook's request just read.
        others = knowledge_bench.questions(household, seed=12).texts[: ROUNDS + 3]
        live = (
            Fact.objects.as_system("the benchmark counts its household")
            .for_memory(household.memory)
            .live()
            .count()
        )
        with tempfile.TemporaryDirectory(prefix="brain-bench-hook-") as name:
            folder = Path(name)
            store = None
            if cli is not None:
                rows = list(
                    Fact.objects.as_system("the benchmark counts its household")
                    .for_memory(household.memory)
                    .live()
                    .values_list("text", "confidence", "support")
                )
                store = brainmem.load(cli, rows, folder)
            with _runserver() as server:
                figures = _measure(server, token.key, slug, goals, others, folder, cli, store)
    finally:
        if made_token:
            token.delete()
    return _markdown(figures, live, why_not, load_before)


def _measure(server, token, slug, goals, others, folder, cli, store) -> dict:
    connection_file = folder / "connection.json"
    connection_file.write_text(
        json.dumps({"url": server.url, "token": token, "memory": slug, "budget": BUDGET})
    )
    wiring = install.Wiring(
        python=os.path.abspath(sys.executable),
        hooks_script=str(Path(hooks.__file__).resolve()),
        brain="",
        url=server.url,
        token=token,
        memory=slug,
    )
    command = wiring.hook_command("SessionStart", connection_file)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder)}
    theirs_env = {**env, "BRAINMEM_DB": str(store)} if store else env
    cwd = str(folder)
    # Warm up: the server loads its embedder on the first question, brainmem's pages come in.
    others, warm_ups = others[:-3], others[-3:]
    for goal in warm_ups:
        _timed_process(command, stdin=_payload(goal, cwd), env=env, shell=True)
        if cli is not None:
            _timed_process([str(cli), "context", goal, "--budget", str(BUDGET)], env=theirs_env)
    client = hooks.Client(hooks.Connection(url=server.url, token=token, memory=slug))
    ours, theirs, floor, answer = [], [], [], []
    printed = {"ours": 0, "theirs": 0}
    for goal, other in zip(goals, others, strict=True):
        seconds, ran = _timed_process(command, stdin=_payload(goal, cwd), env=env, shell=True)
        ours.append(seconds)
        printed["ours"] += "- [" in ran.stdout
        if cli is not None:
            seconds, ran = _timed_process(
                [str(cli), "context", goal, "--budget", str(BUDGET)], env=theirs_env
            )
            if ran.returncode != 0:
                raise RuntimeError(f"brainmem context failed: {ran.stderr.strip()[-300:]}")
            theirs.append(seconds)
            printed["theirs"] += "- [" in ran.stdout
        floor.append(_timed_process([sys.executable, "-I", "-S", "-c", "pass"], env=env)[0])
        started = time.perf_counter()
        client.call("POST", hooks.CONTEXT_PATH, {"question": other, "token_budget": BUDGET})
        answer.append(time.perf_counter() - started)
    return {
        "answer": _ms(answer),
        "ours": _ms(ours),
        "theirs": _ms(theirs) if theirs else None,
        "floor": _ms(floor),
        "printed": printed,
        "rounds": len(goals),
    }


def _markdown(figures: dict, live: int, why_not: str, load_before: float) -> str:
    ours, theirs, floor = figures["ours"], figures["theirs"], figures["floor"]
    answer = figures["answer"]
    rounds, printed = figures["rounds"], figures["printed"]
    size = _size(live)
    lines = [
        f"## The SessionStart hook at {size} live facts, against brainmem 0.3.0\n",
        "Wall time of the whole hook process, from spawn to exit, as Claude Code runs it: the "
        "command `brain agent install` writes, through `/bin/sh`, the SessionStart payload on "
        f"stdin with a goal, budget {BUDGET} tokens. Ours is the lean hook (`agent/hooks.py`: "
        "`python -I -S`, standard library only) asking a running `manage.py runserver` with a "
        f"token; the memory holds {live:,} live facts (the synthetic household of the recall "
        "benchmark; the server embeds each goal with "
        f"`{settings.BRAIN_EMBEDDER}`). brainmem is `{brainmem.BRAINMEM}` from PyPI in its own "
        "venv under var/, its `brainmem context GOAL --budget "
        f"{BUDGET}` over a SQLite store loaded with the same texts, confidences and support "
        "(its default hash embedder, a scan of every live vector per query). The same "
        f"{rounds} goals for both, interleaved, after 3 warm-up runs each. A ratio above 1 "
        "means ours is faster (brainmem p50 ÷ ours p50).\n",
        "| process | p50 / p95 | blocks printed | vs brainmem |",
        "|---|---:|---:|---:|",
        f"| brain SessionStart hook → server | {ours[0]:.0f} / {ours[1]:.0f} ms | "
        f"{printed['ours']} of {rounds} | "
        + (f"{theirs[0] / ours[0]:.1f}× |" if theirs else "— |"),
    ]
    if theirs:
        lines.append(
            f"| brainmem 0.3.0 `brainmem context` | {theirs[0]:.0f} / {theirs[1]:.0f} ms | "
            f"{printed['theirs']} of {rounds} | 1.0× |"
        )
    lines.append(
        f"| in ours: the server's answer (a request from a running client, other goals) | "
        f"{answer[0]:.0f} / {answer[1]:.0f} ms | — | — |"
    )
    lines.append(f"| floor: `python -I -S -c pass` | {floor[0]:.0f} / {floor[1]:.0f} ms | — | — |")
    lines.append("")
    if why_not:
        lines.append(f"brainmem was not measured: {why_not}. Ours is reported alone.\n")
    cores, load_after = os.cpu_count() or 1, os.getloadavg()[0]
    lines.append(
        f"Load average (1 min) on this machine's {cores} cores: {load_before:.1f} when this "
        f"benchmark started, {load_after:.1f} when it ended.\n"
    )
    met = "met" if ours[0] < TARGET_MS else "**not met**"
    lines.append(
        f"Target: the hook under {TARGET_MS} ms at p50 with {size} live facts — "
        f"{ours[0]:.0f} ms, {met}.\n"
    )
    return "\n".join(lines)
