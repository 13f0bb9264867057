"""Test harness pieces shared by every app's tests: a real Celery worker and headless Chromium.

Imported only from conftest.py files.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import redis

from brain import embedded

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Tests get a Valkey of their own, so a `make run` worker never takes a test's task. Two test
# runs at once (two checkouts' worth of work on one machine) each name a database of their own
# (BRAIN_TEST_DATABASE) and a broker database of their own here, so neither's worker takes the
# other's tasks.
test_valkey = embedded.EmbeddedValkey(name="valkey-test")
TEST_BROKER_DB = int(os.environ.get("BRAIN_TEST_BROKER_DB", "0"))


def database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for another process to reach the database this test run is using."""
    host = settings_dict.get("HOST") or ""
    if host.startswith("/"):
        host = quote(host, safe="")
    user = quote(settings_dict.get("USER") or "")
    password = settings_dict.get("PASSWORD") or ""
    credentials = f"{user}:{quote(password)}@" if password else f"{user}@" if user else ""
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{credentials}{host}{port}/{settings_dict['NAME']}"


@contextmanager
def celery_worker(
    settings_dict: dict,
    *,
    concurrency: int = 1,
    extra_env: dict | None = None,
    queues: str = "celery,compile",
    name: str = "test-worker",
    program: list[str] | None = None,
) -> Iterator[subprocess.Popen]:
    """A real ``celery worker`` process on the test database and the test broker, taking
    ``queues`` (both of brain's unless told: `make run` gives compiling a worker of its own).
    ``program``: a worker's command as `make run` starts it (``brain.run.programs``), run as it
    is but for its name and Celery's chatter between workers.

    Yields once the worker has connected and is ready; stops it (warm shutdown) on exit.
    """
    test_valkey.ensure_running()
    # Messages earlier tests published with no worker listening would run against rows that
    # no longer exist; start every worker on an empty queue.
    redis.Redis(unix_socket_path=str(test_valkey.socket_path), db=broker_db()).flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(settings_dict),
        "REDIS_URL": test_valkey.url(broker_db()),
        "PYTHONUNBUFFERED": "1",
        "BRAIN_EMBEDDER": "hash",
        **(extra_env or {}),
    }
    log_path = embedded.VAR_DIR / "log" / f"{name}-{os.getpid()}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    celery = str(Path(sys.executable).with_name("celery"))
    argv = program or [
        celery,
        "-A",
        "brain",
        "worker",
        "--loglevel",
        "INFO",
        "--pool",
        "prefork",
        "--concurrency",
        str(concurrency),
        "--queues",
        queues,
    ]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                *argv,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--hostname",
                f"{name}-{os.getpid()}@%h",
            ],
            cwd=embedded.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(lambda: "ready." in log_path.read_text(), process, log_path, timeout=60)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# The test database left dirty -----------------------------------------------------------------
#
# pyproject's addopts reuse the test database from one run to the next (--reuse-db): creating
# it runs every migration, about 20 s. A transactional test commits its rows and removes them
# (a flush of every table) when it ends; a run stopped in between (a timeout's SIGKILL, Ctrl-C
# at the wrong moment, a closed terminal) leaves them, and the next run's tests trip over them
# ("Key (username)=(sarah) already exists"). So a run marks the database in use once it is set
# up and clears the mark when it ends whole; the next run finds a mark whose process is gone, or
# people in a database no migration puts people in, and creates the database afresh.

RUNS_DIR = embedded.VAR_DIR / "test-runs"


def _mark(database: str) -> Path:
    return RUNS_DIR / f"{database}.pid"


def mark_in_use(database: str) -> None:
    """Called once the test database is ready: a run is using it from now on."""
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    _mark(database).write_text(str(os.getpid()))


def mark_finished(database: str) -> None:
    """Called when a run ended whole; an interrupted one leaves its mark for the next."""
    mark = _mark(database)
    with contextlib.suppress(OSError, ValueError):
        if int(mark.read_text()) == os.getpid():
            mark.unlink()


def _pytest_running(pid: int) -> bool:
    if pid == os.getpid() or not embedded.pid_alive(pid):
        return False
    try:
        return b"pytest" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class DatabaseInUse(RuntimeError):
    """Another pytest is using this test database now."""


_worker = ""


def set_worker(name: str) -> None:
    """Called once by conftest.py with the worker's id from its pytest config (a pytest that a
    test starts inherits the environment's PYTEST_XDIST_WORKER, but is no worker)."""
    global _worker
    _worker = name


def worker() -> str:
    """This process's name as a worker of ``pytest -n`` (gw0, gw1…), or "" when it is none."""
    return _worker


def test_database_name(settings_dict: dict) -> str:
    """The test database this process uses: pytest-django's name, with a worker's suffix."""
    name = settings_dict["TEST"].get("NAME") or f"test_{settings_dict['NAME']}"
    return f"{name}_{worker()}" if worker() else name


def left_dirty(settings_dict: dict, database: str) -> str | None:
    """Why the test database ``database`` must be created afresh before this run, or None when
    it may be reused as it is (or does not exist yet). Raises DatabaseInUse when another pytest
    holds it: two runs on one database would remove each other's rows."""
    import psycopg

    mark = _mark(database)
    with contextlib.suppress(OSError, ValueError):
        pid = int(mark.read_text())
        if _pytest_running(pid):
            raise DatabaseInUse(
                f"the test database {database} is in use by another test run (pid {pid}): wait "
                "for it, or name another with BRAIN_TEST_DATABASE=… (and BRAIN_TEST_BROKER_DB=…)."
            )
        if pid != os.getpid():
            return f"the run that used it last (pid {pid}) was stopped before it ended"
    params = {
        key: settings_dict[name]
        for key, name in (("host", "HOST"), ("port", "PORT"), ("user", "USER"))
        if settings_dict.get(name)
    }
    if settings_dict.get("PASSWORD"):
        params["password"] = settings_dict["PASSWORD"]
    try:
        conn = psycopg.connect(dbname=database, connect_timeout=10, **params)
    except psycopg.OperationalError:
        return None  # not created yet (or no server: the run says so itself)
    with conn:
        if _first(conn, "SELECT to_regclass('auth_user') IS NULL"):
            return None
        if _first(conn, "SELECT EXISTS (SELECT FROM auth_user)"):
            return "it holds people a test committed, which no migration makes"
    return None


def _first(conn, sql: str):
    row = conn.execute(sql).fetchone()
    return row[0] if row else None


def broker_db() -> int:
    """The test broker's database this process uses: BRAIN_TEST_BROKER_DB, and for a worker of
    ``pytest -n`` one after it per worker (gw0 the next), so no worker takes another's tasks."""
    name = worker()
    return TEST_BROKER_DB + (int(name.removeprefix("gw")) + 1 if name else 0)


def use_test_broker() -> None:
    """Make this process publish to the test broker, never to the one `make run` uses."""
    from brain.celery import app

    app.conf.broker_url = test_valkey.url(broker_db())
    app.conf.result_backend = test_valkey.url(broker_db())


def _wait_for(condition, process: subprocess.Popen, log_path: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the worker exited with {process.returncode}:\n{log_path.read_text()[-3000:]}"
            )
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the worker was not ready in {timeout} s:\n{log_path.read_text()[-3000:]}")


def wait_until(condition, *, timeout: float = 30, interval: float = 0.1, message: str = ""):
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(message or f"condition not met within {timeout} s")
        time.sleep(interval)


def run_async(work):
    """``anyio.run(work)`` in a thread of its own, returning its result or raising its error.
    Browser tests leave Playwright's event loop running in the test's thread for the rest of
    the session, and a second loop cannot start where one runs. The thread's own database
    connections are closed before it ends."""
    import threading

    import anyio

    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = anyio.run(work)
        except BaseException as error:  # re-raised in the caller's thread below
            outcome["error"] = error
        finally:
            from django.db import connections

            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
