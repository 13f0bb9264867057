"""The worker round trip against calling the same stub model directly (registered in
settings.BRAIN_BENCHMARKS).

What is timed is what a job waits for when its memory's calls go to a worker:
``llm.complete(task=…, memory=…)`` with the memory's route for the task naming a worker. The
gateway writes the waiting call and waits for its answer; a real `brain worker` process,
long-polling a running server (gunicorn with brain/gunicorn_conf.py and ``DJANGO_DEBUG=0``,
the production path of `make run`), takes it, asks an Ollama-shaped stub model on loopback
(``brain.llm.local_stub``) and posts the answer; the gateway wakes and returns it. The
baseline, in the same run and interleaved call by call, is the same stub asked directly with
the worker's own client (``brain.worker.local.OllamaAPI``): the model call with nothing in
between. The overhead is the difference of each pair, so a stub that is slower for a moment
counts on both sides.

Target: the overhead under 30 ms per call at p50 on loopback (the issue's). It is what a
person's job pays for a model on their own machine; a local model's own answer takes seconds.
``BRAIN_BENCH_WORKER_CALLS`` sets the number of calls (200).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings
from django.db import connection

from brain import llm, run, workers
from brain.llm.local_stub import OllamaStub, local_json
from brain.models import ModelCall
from brain.testing import database_url
from brain.worker.local import OllamaAPI

CALLS = int(os.environ.get("BRAIN_BENCH_WORKER_CALLS", "200"))
WARM_UP = 10
TARGET_MS = 30.0
SLUG = "bench-workers"
TASK = "bench_worker_round_trip"
MODEL = "bench-model"
SYSTEM = "Decide whether to keep the line. Answer with one JSON object."
ANSWER = {"decision": "keep", "reason": "It is new."}


class Server:
    """gunicorn on a free loopback port, as `make run` serves with ``DJANGO_DEBUG=0``."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        web = run.programs(self.port, debug=False)[0]
        env = {**os.environ, **run.PLAIN_HTTP_ON_LOOPBACK, "DJANGO_DEBUG": "0"}
        env["DATABASE_URL"] = database_url(connection.settings_dict)
        self.process = subprocess.Popen(
            web.argv,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:  # any answer will do: a worker endpoint refusing no token is one
                with urllib.request.urlopen(f"{self.url}/api/worker/calls/next", timeout=2):
                    return self
            except urllib.error.HTTPError:
                return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"gunicorn did not answer at {self.url}")

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _ms(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def worker_round_trip() -> str:
    """``CALLS`` model calls through a worker and as many straight to the stub, interleaved."""
    from knowledge.models import Memory

    load_before = os.getloadavg()[0]
    Memory.objects.filter(slug=SLUG).delete()  # left by a run that was killed
    memory = Memory.objects.create(slug=SLUG, name="Benchmark: workers", learning=False)
    started_at = time.time()
    try:
        key = workers.create_token(memory=memory, name="bench").key
        workers.set_route(memory=memory, task=TASK, provider="worker", model=MODEL)
        with OllamaStub(models=(MODEL,)) as stub, Server() as server:
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
    answer = llm.complete(
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
    direct, worker = [], []
    for number in range(CALLS):
        prompt = f"The loft is warm ({number})."
        if number % 2:  # alternate which goes first, so neither always follows the other
            direct.append(_direct(direct_model, prompt))
            worker.append(_through_worker(memory, prompt))
        else:
            worker.append(_through_worker(memory, prompt))
            direct.append(_direct(direct_model, prompt))
    overhead = [w - d for w, d in zip(worker, direct, strict=True)]
    rows = ModelCall.objects.filter(task=TASK)
    return {
        "direct": _ms(direct),
        "worker": _ms(worker),
        "overhead": _ms(overhead),
        "calls": CALLS,
        "rows": rows.count(),
        "providers": sorted(set(rows.values_list("provider", flat=True))),
    }


def _markdown(figures: dict, load_before: float) -> str:
    direct, worker, overhead = figures["direct"], figures["worker"], figures["overhead"]
    calls = figures["calls"]
    met = "met" if overhead[0] < TARGET_MS else "**not met**"
    cores, load_after = os.cpu_count() or 1, os.getloadavg()[0]
    return "\n".join(
        [
            "## Workers: the round trip through a worker against the same model asked directly\n",
            f"{calls} model calls through a worker and {calls} straight to the same stub model, "
            "interleaved call by call, after "
            f"{WARM_UP} warm-up calls. Through a worker: `llm.complete` for a memory whose route "
            "sends the task to a worker — the gateway writes the waiting call and waits; a real "
            "`brain worker` process long-polling gunicorn on loopback (`DJANGO_DEBUG=0`, "
            "brain/gunicorn_conf.py) takes it, asks "
            "an Ollama-shaped stub model (`brain/llm/local_stub.py`, answering at once) and posts "
            "the answer; the gateway wakes on PostgreSQL's NOTIFY and returns it, its `ModelCall` "
            "row written. Directly: the worker's own client asks the same stub. The overhead is "
            "the difference of each pair.\n",
            "| path | p50 / p95 | ratio to baseline (p50) |",
            "|---|---:|---:|",
            f"| through a worker (`llm.complete`) | {worker[0]:.1f} / {worker[1]:.1f} ms | "
            f"{worker[0] / direct[0]:.1f}× |",
            f"| the stub model asked directly (baseline) | {direct[0]:.1f} / {direct[1]:.1f} ms "
            "| 1.0× |",
            f"| overhead of the worker round trip, per call | {overhead[0]:.1f} / "
            f"{overhead[1]:.1f} ms | — |",
            "",
            f"`ModelCall` rows written: {figures['rows']:,} (provider "
            f"{', '.join(figures['providers']) or 'none'}), one per call through the gateway. "
            f"Load average (1 min) on this machine's {cores} cores: {load_before:.1f} when this "
            f"benchmark started, {load_after:.1f} when it ended ({figures['seconds']:.0f} s).\n",
            "Targets:\n",
            f"- overhead of the worker round trip p50 under {TARGET_MS:.0f} ms on loopback — "
            f"{overhead[0]:.1f} ms, {met}.\n",
        ]
    )
