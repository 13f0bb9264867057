"""The production server under load (one of `make bench`'s BENCHMARKS; not in CI).

`make run`'s production path — gunicorn with brain/gunicorn_conf.py and a Celery worker, started
by brain/run.py's supervisor with DJANGO_DEBUG=0 — against the database and broker the app uses,
in a memory of its own that is deleted afterwards. WRITERS clients teach over the API as a staff
account's token (``POST /api/memory/add``) and READERS ask (``POST /api/context`` and ``GET
/api/facts/``), each opening a connection per request as an automation does, for
BRAIN_BENCH_LOAD_SECONDS (120; shorter while developing).

Targets, each of which must be exactly zero: connections reset, refused or timed out; 5xx
answers; lost writes (an acknowledged fact not live once the passes the writes asked for have
settled). p50/p95 latencies are compared with the same requests one at a time on the idle
server, measured in the same run, so the machine's speed cancels.

Every sentence names a crate of its own ("Crate Kalomi holds the tent pegs in the loft."), so
the write gate judges each one novel and a fact can only go missing by being lost, not by being
merged or replaced.
"""

from __future__ import annotations

import http.client
import io
import itertools
import json
import os
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.serving import free_port
from brain import embedded, gunicorn_conf, run
from brain.env import env_int

WRITERS = 50
READERS = 5
ALONE = 20  # requests of each kind one at a time on the idle server, for the baseline
TIMEOUT_S = 60  # a client's patience; above gunicorn's own 60 s timeout
SETTLE_S = 300  # how long the passes the writes asked for may take to finish afterwards
HEADING = "## The production server under load"

SYLLABLES = [
    "ka", "lo", "mi", "ra", "te", "vu", "no", "si", "be", "da", "fo", "gu", "pe", "zi", "ho", "ju",
]  # fmt: skip
THINGS = [
    "the spare fuses", "the picnic rug", "old phone chargers", "the tent pegs",
    "winter gloves", "the bike pump", "seed packets", "the torch batteries",
]  # fmt: skip
PLACES = [
    "under the stairs", "in the loft", "in the garage", "behind the boiler", "in the shed",
    "in the hall cupboard",
]  # fmt: skip


def sentence(n: int) -> str:
    """Statement ``n``: a crate named for ``n`` (four syllables, 65,536 names)."""
    name, rest = "", n
    for _ in range(4):
        name += SYLLABLES[rest % 16]
        rest //= 16
    return f"Crate {name.capitalize()} holds {THINGS[n % 8]} {PLACES[n // 8 % 6]}."


def question(n: int) -> str:
    return f"Which crate holds {THINGS[n % 8]} {PLACES[n // 7 % 6]}?"


@dataclass
class Tally:
    """What every client saw, merged under a lock."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    broken: Counter = field(default_factory=Counter)  # connection-level failures by type
    acknowledged: list[int] = field(default_factory=list)  # fact ids of 2xx writes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, seconds: float, status: int, fact: int | None = None) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)
            self.statuses[status] += 1
            if fact is not None:
                self.acknowledged.append(fact)

    def failed(self, kind: str, error: Exception) -> None:
        with self.lock:
            self.broken[f"{kind}: {type(error).__name__}"] += 1


class Client:
    """One request per connection, as an automation's HTTP client without a pool does."""

    def __init__(self, port: int, token: str, memory: str):
        self.port, self.memory = port, memory
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        try:
            separator = "&" if "?" in path else "?"
            conn.request(
                method,
                f"{path}{separator}memory={self.memory}",
                body=json.dumps(body) if body is not None else None,
                headers=self.headers,
            )
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, {"body": raw[:200].decode(errors="replace")}

    def write(self, n: int, tally: Tally) -> None:
        self._timed("write", tally, "POST", "/api/memory/add", {"fact": sentence(n)})

    def read(self, n: int, tally: Tally) -> None:
        if n % 2:
            self._timed("read: context", tally, "POST", "/api/context", {"question": question(n)})
        else:
            word = THINGS[n % 8].split()[-1]
            self._timed("read: facts list", tally, "GET", f"/api/facts/?q={word}")

    def _timed(self, kind: str, tally: Tally, method: str, path: str, body=None) -> None:
        started = time.perf_counter()
        try:
            status, answer = self.call(method, path, body)
        except (OSError, http.client.HTTPException) as error:
            tally.failed(kind, error)
            return
        fact = answer.get("fact") if kind == "write" and 200 <= status < 300 else None
        tally.record(kind, time.perf_counter() - started, status, fact)


@dataclass
class Servers:
    """gunicorn and a Celery worker under make run's supervisor, in a thread of this process."""

    port: int
    log: Path
    supervisor: run.Supervisor | None = None
    thread: threading.Thread | None = None
    out: io.TextIOWrapper | None = None

    def start(self) -> None:
        web, worker, *_ = run.programs(self.port, debug=False)  # not the compiler, not beat
        worker = run.Program("worker", [*worker.argv, "--hostname", f"bench-load-{os.getpid()}@%h"])
        env = {**os.environ, "DJANGO_DEBUG": "0", "PYTHONUNBUFFERED": "1"}
        env.update({k: v for k, v in run.PLAIN_HTTP_ON_LOOPBACK.items() if k not in os.environ})
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.supervisor = run.Supervisor([web, worker], env=env, cwd=run.BASE_DIR, out=self.out)
        self.thread = threading.Thread(target=self.supervisor.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 120
        while not (self._answers() and "ready." in self.log.read_text()):
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the servers did not start; see {self.log}")
            time.sleep(0.5)

    def _answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/healthz")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def restarts(self) -> int:
        text = self.log.read_text()
        return text.count("; starting it again")

    def web_memory_mb(self) -> list[float]:
        """Resident memory of each gunicorn worker process, in MB."""
        assert self.supervisor is not None  # started by start()
        web = next(c for c in self.supervisor.children if c.program.name == "web")
        assert web.process is not None  # running while the load is measured
        master = web.process.pid
        sizes = []
        for entry in Path("/proc").iterdir():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("PPid", "").strip() == str(master):
                sizes.append(int(fields["VmRSS"].split()[0]) / 1024)
        return sizes

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
            assert self.thread is not None  # started with the supervisor
            self.thread.join(timeout=60)
        if self.out is not None:
            self.out.close()


def _ms(seconds: list[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    if len(seconds) < 2:
        return (seconds[0] * 1000,) * 2 if seconds else (0.0, 0.0)
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def production_server_under_load() -> str:
    """50 writers and 5 readers against gunicorn and a real worker; resets, 5xx, lost writes."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from knowledge.models import Fact, Memory
    from memory.models import ConsolidationRun

    seconds = env_int("BRAIN_BENCH_LOAD_SECONDS", 120, minimum=5)
    slug = f"bench-load-{os.getpid()}"
    memory = Memory.objects.create(slug=slug, name="Benchmark: load")
    user = get_user_model().objects.create_user(username=slug, is_staff=True)
    token = Token.objects.create(user=user).key
    servers = Servers(port=free_port(), log=embedded.VAR_DIR / "log" / "bench-load.log")
    busy_before = os.getloadavg()[0]  # others' work on the machine slows every figure
    try:
        servers.start()
        client = Client(servers.port, token, slug)
        alone = Tally()
        for n in range(ALONE):
            client.write(60_000 + n, alone)
            client.read(n, alone)
        loaded, counter, counter_lock = Tally(), itertools.count(), threading.Lock()
        ends_at = time.monotonic() + seconds

        def writer() -> None:
            while time.monotonic() < ends_at:
                with counter_lock:
                    n = next(counter)
                client.write(n, loaded)

        def reader(offset: int) -> None:
            n = offset
            while time.monotonic() < ends_at:
                client.read(n, loaded)
                n += READERS

        threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
        threads += [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        settled = _settle(memory)
        web_mb = servers.web_memory_mb()
        restarts = servers.restarts()
    finally:
        servers.stop()
    acknowledged = set(alone.acknowledged) | set(loaded.acknowledged)
    believed = set(
        Fact.objects.as_system("the load test checks what it wrote")
        .live()
        .filter(memory=memory, pk__in=acknowledged)
        .values_list("pk", flat=True)
    )
    passes = Counter(ConsolidationRun.objects.filter(memory=memory).values_list("state", flat=True))
    try:
        return _section(
            alone=alone,
            loaded=loaded,
            elapsed=elapsed,
            lost=len(acknowledged - believed),
            acknowledged=len(acknowledged),
            settled=settled,
            passes=passes,
            restarts=restarts,
            web_mb=web_mb,
            seconds=seconds,
            busy_before=busy_before,
        )
    finally:
        _delete(memory, user)


def _settle(memory) -> float | None:
    """Seconds until nothing waits to be filed (asking for a last pass, as a person would, for
    the few items below the early pass's threshold); None past SETTLE_S."""
    from memory import consolidator
    from memory.models import ConsolidationRun, InboxItem

    started = time.monotonic()
    while time.monotonic() - started < SETTLE_S:
        busy = ConsolidationRun.objects.running().filter(memory=memory).exists()
        if not busy:
            if (
                not InboxItem.objects.as_system("the load test checks what it wrote")
                .for_memory(memory)
                .pending()
                .exists()
            ):
                return time.monotonic() - started
            consolidator.request_consolidation(
                memory=memory, trigger=ConsolidationRun.Trigger.MANUAL
            )
        time.sleep(1)
    return None


def _delete(memory, user) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
    try:
        memory.delete()
        user.delete()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")


def _section(
    *,
    alone: Tally,
    loaded: Tally,
    elapsed: float,
    lost: int,
    acknowledged: int,
    settled: float | None,
    passes: Counter,
    restarts: int,
    web_mb: list[float],
    seconds: int,
    busy_before: float,
) -> str:
    server_errors = sum(n for status, n in loaded.statuses.items() if status >= 500)
    refused = sum(n for status, n in loaded.statuses.items() if 400 <= status < 500)
    broken = sum(loaded.broken.values())
    targets = [
        ("connections reset, refused or timed out", broken, ", ".join(sorted(loaded.broken))),
        ("5xx answers", server_errors, ""),
        ("lost writes (acknowledged, not live afterwards)", lost, f"of {acknowledged:,}"),
    ]
    rows = ["| target | result | |", "|---|---:|---|"]
    rows += [
        f"| {name} = 0 | {value:,} | {'met' if value == 0 else '**not met**'}"
        f"{'; ' + detail if detail else ''} |"
        for name, value, detail in targets
    ]
    latency = [
        "| requests | under load | p50 | p95 | alone p50 | p50 ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind in ("write", "read: context", "read: facts list"):
        under, idle = loaded.latencies.get(kind, []), alone.latencies.get(kind, [])
        p50, p95 = _ms(under)
        idle50, _ = _ms(idle)
        ratio = f"{p50 / idle50:.1f}×" if idle50 else "–"
        latency.append(
            f"| {kind} | {len(under):,} ({len(under) / elapsed:.1f}/s) | {p50:.0f} ms | "
            f"{p95:.0f} ms | {idle50:.0f} ms | {ratio} |"
        )
    workers = len(web_mb)
    memory = f"{statistics.mean(web_mb):.0f} MB each" if web_mb else "not measured"
    settle = f"within {settled:.0f} s" if settled is not None else f"not within {SETTLE_S} s"
    return (
        f"{HEADING}: {WRITERS} writers and {READERS} readers for {elapsed:.0f} s\n\n"
        "`make run`'s production path (gunicorn, brain/gunicorn_conf.py, and a Celery worker "
        "under brain/run.py's supervisor, DJANGO_DEBUG=0) on the app's database, in a memory "
        f"of its own. {WRITERS} clients teach over the API with a staff token, {READERS} ask "
        "(context and the facts list, in turn), each request on a new connection, none "
        f"waiting between requests; a client gives up after {TIMEOUT_S} s. Baseline: "
        f"{ALONE} requests of each kind one at a time on the idle server. "
        f"BRAIN_BENCH_LOAD_SECONDS sets the duration ({seconds} s here). Measured "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; the load average before it "
        f"was {busy_before:.1f} on {os.cpu_count()} cores.\n\n"
        + "\n".join(rows)
        + "\n\n"
        + "\n".join(latency)
        + "\n\n"
        f"Other answers: {refused:,} 4xx. The writes' passes settled {settle} "
        f"({', '.join(f'{n} {state}' for state, n in sorted(passes.items())) or 'none'}); "
        f"processes started again by the supervisor: {restarts}. gunicorn: {workers} worker "
        f"processes × {gunicorn_conf.threads} threads, {memory} after the run.\n"
    )


def write_section(path: Path, section: str) -> None:
    """Put ``section`` in the benchmarks file: in place of an earlier one, or at the end."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    start = text.find(HEADING)
    if start == -1:
        path.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    end = text.find("\n## ", start + 1)
    rest = text[end + 1 :] if end != -1 else ""
    path.write_text(text[:start] + section + ("\n" + rest if rest else ""))


def main() -> None:
    section = production_server_under_load()
    print(section)
    if os.environ.get("BRAIN_BENCH_LOAD_WRITE") == "1":
        write_section(run.BASE_DIR / "docs" / "BENCHMARKS.md", section)


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
    django.setup()
    main()
