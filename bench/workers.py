"""The worker round trip against calling the same stub model directly (one of `make bench`'s
BENCHMARKS).

What is timed is what a job waits for when its memory's calls go to a worker:
``llm.complete(task=…, memory=…)`` with the memory's route for the task naming a worker. The
gateway writes the waiting call and waits for its answer; a real `brain worker` process,
long-polling a running server (gunicorn with brain/gunicorn_conf.py and ``DJANGO_DEBUG=0``,
the production path of `make run`), takes it, asks an Ollama-shaped stub model on loopback
(``brain.tests.stubs.local_model``) and posts the answer; the gateway wakes and returns it. The
baseline, in the same run and interleaved call by call, is the same stub asked directly with
the worker's own client (``brain.worker.local.OllamaAPI``): the model call with nothing in
between. Each round asks directly, pauses ``PAUSE_S`` so the worker is back in its long poll,
asks through the worker, then through the worker again at once; the overhead is each call
through the worker minus the direct call of its round, so a moment when the machine is slower
counts on both sides. The worker waiting is how a job's call usually finds it (a job does work
of its own between calls); back to back, the worker is still on its way back from the last
answer, and the call waits for it.

Target: the overhead under 30 ms per call at p50 on loopback (the issue's). It is what a
person's job pays for a model on their own machine; a local model's own answer takes seconds.
``BRAIN_BENCH_WORKER_CALLS`` sets the number of rounds (200).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from bench.serving import Served, free_port
from brain import llm, run, workers
from brain.models import ModelCall, WaitingCall, WorkerToken
from brain.tests.stubs.local_model import OllamaStub, local_json
from brain.worker.local import OllamaAPI

CALLS = int(os.environ.get("BRAIN_BENCH_WORKER_CALLS", "200"))
WARM_UP = 10
PAUSE_S = 0.05
TARGET_MS = 30.0
SLUG = "bench-workers"
TASK = "bench_worker_round_trip"
MODEL = "bench-model"
SYSTEM = "Decide whether to keep the line. Answer with one JSON object."
ANSWER = {"decision": "keep", "reason": "It is new."}


def _gunicorn() -> Served:
    """gunicorn on a free loopback port, as `make run` serves with ``DJANGO_DEBUG=0``; a worker
    endpoint refusing a request with no token is its answer."""
    port = free_port()
    return Served(
        run.programs(port, debug=False)[0].argv,
        url=f"http://127.0.0.1:{port}",
        probe="/api/worker/calls/next",
        env={**run.PLAIN_HTTP_ON_LOOPBACK, "DJANGO_DEBUG": "0"},
    )


def _ms(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def worker_round_trip() -> str:
    """``CALLS`` rounds: the stub asked directly, then through a worker twice."""
    from knowledge.models import Memory

    load_before = os.getloadavg()[0]
    Memory.objects.filter(slug=SLUG).delete()  # left by a run that was killed
    memory = Memory.objects.create(slug=SLUG, name="Benchmark: workers", learning=False)
    started_at = time.time()
    try:
        key = workers.create_token(memory=memory, name="bench").key
        workers.set_route(memory=memory, task=TASK, provider="worker", model=MODEL)
        with OllamaStub(models=(MODEL,)) as stub, _gunicorn() as server:
            stub.script(local_json(ANSWER))
            worker = _start_worker(server.url, key, stub.base_url)
            try:
                figures = _measure(memory, stub)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
    finally:
        Memory.objects.filter(slug=SLUG).delete()
        ModelCall.objects.filter(task=TASK).delete()
    figures["seconds"] = time.time() - started_at
    return _markdown(figures, load_before)


def _start_worker(server: str, key: str, endpoint: str) -> subprocess.Popen:
    wrapper = Path(settings.BASE_DIR) / "bin" / "brain"
    command = [str(wrapper), "worker", "--server", server, "--model", MODEL]
    command += ["--endpoint", endpoint, "--api", "ollama", "--name", "bench", "--wait", "20"]
    return subprocess.Popen(
        command,
        env={**os.environ, "BRAIN_WORKER_TOKEN": key},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _through_worker(memory, prompt: str) -> float:
    started = time.perf_counter()
    answer: llm.Answer[Any] = llm.complete(
        task=TASK, system=SYSTEM, prompt=prompt, max_tokens=100, timeout=30, memory=memory
    )
    seconds = time.perf_counter() - started
    if '"keep"' not in answer.text:
        raise RuntimeError(f"the worker's answer was not the stub's: {answer.text[:200]!r}")
    return seconds


def _direct(model: OllamaAPI, prompt: str) -> float:
    started = time.perf_counter()
    model.chat(system=SYSTEM, prompt=prompt, max_tokens=100, schema=None, timeout=30)
    return time.perf_counter() - started


def _measure(memory, stub: OllamaStub) -> dict:
    direct_model = OllamaAPI(endpoint=stub.base_url, model=MODEL)
    # Warm up: the worker's first long poll, the server's first requests, the connection.
    _through_worker(memory, "warm up 0")  # waits for the worker to start asking, too
    for number in range(1, WARM_UP):
        _through_worker(memory, f"warm up {number}")
        _direct(direct_model, f"warm up {number}")
    direct, waiting, back_to_back = [], [], []
    for number in range(CALLS):
        prompt = f"The loft is warm ({number})."
        direct.append(_direct(direct_model, prompt))
        time.sleep(PAUSE_S)  # the worker is back in its long poll, as a job usually finds it
        waiting.append(_through_worker(memory, prompt))
        back_to_back.append(_through_worker(memory, f"{prompt} Again."))
    rows = ModelCall.objects.filter(task=TASK)
    return {
        "commit": _commit_ms(memory),
        "steps": _steps(memory, waiting),
        "direct": _ms(direct),
        "waiting": _ms(waiting),
        "back_to_back": _ms(back_to_back),
        "overhead": _ms([w - d for w, d in zip(waiting, direct, strict=True)]),
        "overhead_back_to_back": _ms([w - d for w, d in zip(back_to_back, direct, strict=True)]),
        "calls": CALLS,
        "rows": rows.count(),
        "providers": sorted(set(rows.values_list("provider", flat=True))),
    }


def _commit_ms(memory) -> float:
    """p50 of one small write committed on this database now: what each of a call's commits
    costs the machine at the moment (its disk's flush under whatever else runs)."""
    token = WorkerToken.objects.filter(memory=memory).first()
    assert token is not None  # the worker the benchmark started holds one
    seconds = []
    for _ in range(50):
        started = time.perf_counter()
        WorkerToken.objects.filter(pk=token.pk).update(last_seen_at=timezone.now())
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1000


def _steps(memory, waiting: list[float]) -> dict[str, float]:
    """Where a call through a waiting worker spends its time, p50 of each step, from the
    waiting call's own timestamps: the server handing it out (written → leased), the worker
    asking the model and posting the answer (leased → answered), and the gateway's own work
    before and after (the rest)."""
    lease = workers.lease_s()
    rows = list(WaitingCall.objects.filter(memory=memory).order_by("pk"))[WARM_UP:][0::2]
    handed, served, gateway = [], [], []
    for row, total in zip(rows, waiting, strict=True):
        if row.lease_expires_at is None or row.answered_at is None:
            continue
        leased = row.lease_expires_at.timestamp() - lease
        handed.append(leased - row.created_at.timestamp())
        served.append(row.answered_at.timestamp() - leased)
        gateway.append(total - (row.answered_at - row.created_at).total_seconds())
    return {
        "handed": statistics.median(handed) * 1000,
        "served": statistics.median(served) * 1000,
        "gateway": statistics.median(gateway) * 1000,
    }


def _markdown(figures: dict, load_before: float) -> str:
    direct, waiting, back = figures["direct"], figures["waiting"], figures["back_to_back"]
    overhead, overhead_back = figures["overhead"], figures["overhead_back_to_back"]
    calls = figures["calls"]
    met = "met" if overhead[0] < TARGET_MS else "**not met**"
    cores, load_after = os.cpu_count() or 1, os.getloadavg()[0]
    return "\n".join(
        [
            "## Workers: a model call through a worker against the same model asked directly\n",
            "Through a worker: `llm.complete` for a memory whose route sends the task to a "
            "worker — the gateway writes the waiting call and waits; a real `brain worker` "
            "process long-polling gunicorn on loopback (`DJANGO_DEBUG=0`, "
            "brain/gunicorn_conf.py) takes it, asks an Ollama-shaped stub model "
            "(`brain/tests/stubs/local_model.py`, answering at once) and posts the answer; the "
            "gateway wakes on PostgreSQL's NOTIFY and returns it, its `ModelCall` row written. "
            "Directly (the baseline): the worker's own client asks the same stub. "
            f"{calls} rounds after {WARM_UP} warm-up calls, each: one call directly, a pause of "
            f"{PAUSE_S * 1000:.0f} ms, one call through the worker (waiting in its long poll, as "
            "a job's call usually finds it), and one more at once (back to back: the worker is "
            "still coming back from the last answer). The overhead is each call through the "
            "worker minus the direct call of its round.\n",
            "| path | p50 / p95 | overhead p50 / p95 | ratio to baseline (p50) |",
            "|---|---:|---:|---:|",
            f"| through a worker, the worker waiting | {waiting[0]:.1f} / {waiting[1]:.1f} ms | "
            f"{overhead[0]:.1f} / {overhead[1]:.1f} ms | {waiting[0] / direct[0]:.1f}× |",
            f"| through a worker, back to back | {back[0]:.1f} / {back[1]:.1f} ms | "
            f"{overhead_back[0]:.1f} / {overhead_back[1]:.1f} ms | {back[0] / direct[0]:.1f}× |",
            f"| the stub model asked directly (baseline) | {direct[0]:.1f} / {direct[1]:.1f} ms "
            "| — | 1.0× |",
            "",
            "Where a call through a waiting worker spends its time (p50 of each step, from the "
            f"waiting call's timestamps): the server handing it to the worker "
            f"{figures['steps']['handed']:.1f} ms (written → leased), the worker asking the model "
            f"and posting its answer {figures['steps']['served']:.1f} ms (leased → answered), the "
            f"gateway before and after {figures['steps']['gateway']:.1f} ms. For scale: one "
            f"small write committed on this database took {figures['commit']:.1f} ms (p50) in "
            "the same run, and a call through a worker commits several times (writing the call, "
            "leasing it, the answer, the gateway's record).\n",
            f"`ModelCall` rows written: {figures['rows']:,} (provider "
            f"{', '.join(figures['providers']) or 'none'}), one per call through the gateway, "
            f"warm-ups included. Load average (1 min) on this machine's {cores} cores: "
            f"{load_before:.1f} when this benchmark started, {load_after:.1f} when it ended "
            f"({figures['seconds']:.0f} s).\n",
            "Targets:\n",
            f"- overhead of the worker round trip p50 under {TARGET_MS:.0f} ms on loopback (the "
            f"worker waiting) — {overhead[0]:.1f} ms, {met}.\n",
        ]
    )
