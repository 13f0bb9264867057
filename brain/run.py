"""`make run`: the embedded servers, migrations, an admin account, then web, worker and beat.

- `make run` is production on loopback: DJANGO_DEBUG=0 unless set, gunicorn
  (brain/gunicorn_conf.py), brain's own 404 and 500 pages, never a traceback. `make dev` sets
  DJANGO_DEBUG=1: runserver with Django's debug pages, reloading on every code change, which is
  what a developer wants. Either serves
  plain HTTP on 127.0.0.1, so with DJANGO_DEBUG=0 the TLS redirect, HSTS and Secure cookies are
  off unless DJANGO_SECURE_SSL_REDIRECT, DJANGO_SECURE_HSTS_SECONDS or DJANGO_SECURE_COOKIES say
  otherwise: a browser never sends a Secure cookie back over http, so no one could sign in.
- The three processes run under ``Supervisor``: their output interleaved and labelled; a process
  that exits is started again, after a pause that doubles with each quick crash; after
  GIVE_UP_AFTER quick crashes in a row, everything stops with one line saying which. Ctrl-C or
  SIGTERM stops the three cleanly and then the embedded servers; should `make run` itself be
  killed outright, the kernel stops them (a parent-death signal), so none is left holding the
  port.
- The port check binds with SO_REUSEADDR, as gunicorn and runserver do: a port whose last
  connections wait in TIME_WAIT (a server just stopped) is free to serve on, a port something
  listens on is not.
- Every refusal is one line naming the problem and the fix, with a non-zero exit; a second
  `make run` while one runs says so and touches nothing.

Why a supervisor of our own (``Supervisor``, about 200 lines) and not a kept process manager.
honcho (a Procfile runner) gives the labelled, interleaved output and the stop on Ctrl-C, but
stops everything when one process exits: a worker killed by the kernel's OOM killer would take
the web down with it instead of being started again. supervisord starts a process again with a
growing pause, but is a daemon of its own with a configuration file and a control socket to
write for each run; a program that keeps failing goes FATAL while the rest run on, where `make
run` should stop and say which; and supervisord killed outright leaves its programs running,
where here each child gets a parent-death signal and none is left holding the port. Neither
knows the rest of this module — the checks, the embedded PostgreSQL and Valkey started before
the programs and stopped after them, migrations and the admin account — so it would be this
module still, driving a second program.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from brain import embedded

BASE_DIR = embedded.BASE_DIR
HOST = "127.0.0.1"
# Celery's queues (settings.CELERY_TASK_ROUTES): compiling has one of its own.
DEFAULT_QUEUE = "celery"
COMPILE_QUEUE = "compile"
# Where this `make run` serves, while it runs: `brain agent install` points the hooks there.
SERVING_FILE = embedded.VAR_DIR / "serving.json"

# A process that dies this soon after starting failed at start-up (a bad setting, a missing
# service), which will happen again; gunicorn and the worker are ready within ~10 s.
QUICK_CRASH_S = 30.0
# Five quick crashes with pauses of 1, 2, 4 and 8 s between them: 15 s, long enough to ride out
# a database or broker restart, short enough to report a broken setting within a minute.
GIVE_UP_AFTER = 5
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# On stop: gunicorn's graceful timeout (10 s) and a margin. A worker still busy after that is
# killed; its task is redelivered (acks_late), so nothing is lost, only redone.
STOP_GRACE_S = 15.0

# make run serves plain HTTP on loopback: production's TLS-only settings would lock people out.
PLAIN_HTTP_ON_LOOPBACK = {
    "DJANGO_SECURE_SSL_REDIRECT": "0",
    "DJANGO_SECURE_HSTS_SECONDS": "0",
    "DJANGO_SECURE_COOKIES": "0",
}


class CannotStart(Exception):
    """One line for the person at the terminal."""


def serving() -> str | None:
    """The address a running `make run` of this checkout serves (``SERVING_FILE``), or None."""
    try:
        served = json.loads(SERVING_FILE.read_text())
        url, pid = served["url"], int(served["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if isinstance(url, str) and embedded.pid_alive(pid) else None


def main() -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as Ctrl-C does
    port = _port()
    started: list = []
    lock = None
    try:
        _check_var_writable()
        debug = _check_settings()
        lock = _claim_run_lock()
        check_port_free(port)
        started = _start_embedded_servers()
        _manage("migrate", "--noinput")
        _manage("ensure_admin")
        if not debug:
            _manage("collectstatic", "--noinput", "-v", "0")
        print(
            "brain: Django's debug server and pages, reloading on save (make dev)"
            if debug
            else "brain: production on loopback: gunicorn, no debug pages (make dev for those)",
            flush=True,
        )
        print(f"brain: starting web, worker and beat — open http://{HOST}:{port}", flush=True)
        SERVING_FILE.write_text(json.dumps({"url": f"http://{HOST}:{port}", "pid": os.getpid()}))
        supervisor = Supervisor(
            programs(port, debug=debug),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=BASE_DIR,
        )
        return supervisor.run_until_signalled()
    except (CannotStart, embedded.EmbeddedServiceError) as problem:
        print(f"brain: {problem}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as failure:
        print(
            f"brain: `{' '.join(failure.cmd[1:])}` failed (exit {failure.returncode}); "
            "see the output above.",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not skip the stop
            signal.signal(sig, signal.SIG_IGN)
        _stop_embedded_servers(started)
        if lock is not None:
            SERVING_FILE.unlink(missing_ok=True)
            lock.close()


def programs(port: int, *, debug: bool) -> list[Program]:
    """Web, worker and beat, as `make run` starts them (bench/load.py starts the same ones)."""
    python = sys.executable
    celery = str(Path(python).with_name("celery"))
    if debug:
        web = [python, "manage.py", "runserver", f"{HOST}:{port}"]
    else:
        web = [python, "-m", "gunicorn", "--config", "python:brain.gunicorn_conf"]
        web += ["--bind", f"{HOST}:{port}"]
    worker = [celery, "-A", "brain", "worker", "--loglevel", "INFO"]
    return [
        Program("web", web),
        # Every task but compiling (passes, briefs, sweeps, reflections, study sessions).
        Program("worker", [*worker, "-Q", DEFAULT_QUEUE, "-c", "2"]),
        # Compiling sources, on its own queue and process: an upload never holds the worker.
        Program("compiler", [*worker, "-Q", COMPILE_QUEUE, "-c", "1", "-n", "compile@%h"]),
        Program("beat", [celery, "-A", "brain", "beat", "--loglevel", "INFO"]),
    ]


def _port() -> int:
    raw = os.environ.get("BRAIN_PORT", "8000")
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        print(f"brain: BRAIN_PORT={raw!r} is not a port number (1-65535).", file=sys.stderr)
        sys.exit(2)
    return int(raw)


def _check_var_writable() -> None:
    var = embedded.VAR_DIR
    try:
        var.mkdir(parents=True, exist_ok=True)
        probe = var / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise CannotStart(
            f"{var} is not writable ({error.strerror}): fix its permissions, or set "
            "BRAIN_VAR_DIR to a folder you can write."
        ) from None


def _check_settings() -> bool:
    """Load the settings once here, so a bad or missing value is one line, not a traceback in
    each process. Returns DEBUG."""
    from django.core.exceptions import ImproperlyConfigured

    from brain.env import env_bool

    os.environ.setdefault("DJANGO_DEBUG", "0")  # make run is production; make dev says 1
    try:
        if not env_bool("DJANGO_DEBUG", False):
            for name, value in PLAIN_HTTP_ON_LOOPBACK.items():
                os.environ.setdefault(name, value)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
        from django.conf import settings

        debug = settings.DEBUG
    except ImproperlyConfigured as problem:
        raise CannotStart(str(problem)) from None
    if not debug and importlib.util.find_spec("gunicorn") is None:
        raise CannotStart(
            f"gunicorn is not installed in {sys.prefix}: run `make run` (it installs "
            "requirements.txt), or `pip install -r requirements.txt`."
        )
    return debug


def _claim_run_lock():
    handle = open(embedded.VAR_DIR / "run.lock", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise CannotStart(
            f"brain is already running (make run, pid {holder}); use that one, or stop it "
            "with Ctrl-C first."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def check_port_free(port: int) -> None:
    """Refuse a port something listens on; accept one that only has connections in TIME_WAIT.

    The probe sets SO_REUSEADDR like the servers that will bind the port: without it a stopped
    server's TIME_WAIT connections (up to a minute) would refuse an immediate restart.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            raise CannotStart(
                f"port {port} on {HOST} is already in use by another program: stop it, or "
                f"run `BRAIN_PORT={port + 1} make run`."
            ) from None


def _start_embedded_servers() -> list[embedded.EmbeddedPostgres | embedded.EmbeddedValkey]:
    started: list[embedded.EmbeddedPostgres | embedded.EmbeddedValkey] = []
    if embedded.uses_embedded_database():
        print("brain: starting the embedded PostgreSQL (var/postgres)…", flush=True)
        embedded.postgres.ensure_running()
        started.append(embedded.postgres)
    if embedded.uses_embedded_broker():
        print("brain: starting the embedded Valkey (var/valkey)…", flush=True)
        embedded.valkey.ensure_running()
        started.append(embedded.valkey)
    return started


def _stop_embedded_servers(
    servers: list[embedded.EmbeddedPostgres | embedded.EmbeddedValkey],
) -> None:
    for server in reversed(servers):
        _tell(f"brain: stopping {type(server).__name__.removeprefix('Embedded')}…", sys.stdout)
        server.stop()


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(BASE_DIR / "manage.py"), *args], check=True, cwd=BASE_DIR)


# The supervisor ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    name: str
    argv: list[str]


class _Child:
    """One program and its current process (None while it waits to be started again)."""

    def __init__(self, program: Program):
        self.program = program
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restart_at = 0.0
        self.quick_crashes = 0
        self.reader: threading.Thread | None = None


class Supervisor:
    """Runs programs side by side, each in a process group of its own, and starts again the one
    that exits. Its own lines start with "brain:"; the programs' lines with their name.

    ``stop()`` may be called from a signal handler or another thread; ``run()`` then stops every
    process (SIGTERM to its group, SIGKILL after ``stop_grace_s``, or at once on a second stop)
    and returns 0. It returns 1 when a program crashed ``give_up_after`` times in a row, each
    within ``quick_crash_s`` of starting.
    """

    def __init__(
        self,
        programs: list[Program],
        *,
        env: dict,
        cwd: Path,
        out: TextIO | None = None,
        first_backoff_s: float = FIRST_BACKOFF_S,
        give_up_after: int = GIVE_UP_AFTER,
        quick_crash_s: float = QUICK_CRASH_S,
        stop_grace_s: float = STOP_GRACE_S,
    ):
        self.children = [_Child(program) for program in programs]
        self.env, self.cwd = env, cwd
        self.out = out or sys.stdout
        self.first_backoff_s, self.give_up_after = first_backoff_s, give_up_after
        self.quick_crash_s, self.stop_grace_s = quick_crash_s, stop_grace_s
        self._width = max(len(program.name) for program in programs)
        self._write_lock = threading.Lock()
        self._stopping = threading.Event()
        self._hurry = threading.Event()

    def stop(self) -> None:
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()

    def run_until_signalled(self) -> int:
        """``run()`` with SIGINT, SIGTERM and SIGHUP meaning stop (twice: stop now)."""
        previous = {
            sig: signal.signal(sig, lambda *_: self.stop())
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        try:
            return self.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def run(self) -> int:
        try:
            for child in self.children:
                self._start(child)
            while not self._stopping.wait(0.2):
                for child in self.children:
                    process = child.process
                    if process is None:
                        if time.monotonic() >= child.restart_at:
                            self._start(child)
                    elif process.poll() is not None and not self._exited(child, process):
                        return 1
            return 0
        finally:
            self._stop_all()

    def _start(self, child: _Child) -> None:
        process = subprocess.Popen(
            child.program.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: signals reach its children too
            preexec_fn=_stop_with_parent,
        )
        child.process, child.started_at = process, time.monotonic()
        child.reader = threading.Thread(target=self._relay, args=(child, process), daemon=True)
        child.reader.start()
        self._say(f"{child.program.name} started (pid {process.pid})")

    def _exited(self, child: _Child, process: subprocess.Popen[bytes]) -> bool:
        """Note that the child's process exited and schedule the restart; False when it is time
        to give up."""
        name = child.program.name
        _signal_group(process.pid, signal.SIGKILL)  # what it left behind (a pool's children)
        ran = time.monotonic() - child.started_at
        child.process = None
        if ran < self.quick_crash_s:
            child.quick_crashes += 1
        else:
            child.quick_crashes = 0
        if child.quick_crashes >= self.give_up_after:
            self._say(
                f"{name} crashed {child.quick_crashes} times in a row, each within "
                f"{self.quick_crash_s:g} s of starting; stopping everything (its output above "
                "says why)."
            )
            return False
        pause = min(self.first_backoff_s * 2 ** max(child.quick_crashes - 1, 0), MAX_BACKOFF_S)
        child.restart_at = time.monotonic() + pause
        self._say(
            f"{name} {_how_it_ended(process.returncode)} after {ran:.0f} s; starting it again "
            f"in {pause:g} s."
        )
        return True

    def _stop_all(self) -> None:
        running = [(child, child.process) for child in self.children if child.process is not None]
        if running:
            self._say(f"stopping {', '.join(child.program.name for child, _ in running)}…")
        for _, process in running:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        while any(process.poll() is None for _, process in running):
            if self._hurry.is_set() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for child, process in running:
            if process.poll() is None:
                self._say(f"{child.program.name} did not stop in time; killing it")
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        for child in self.children:
            if child.reader is not None:
                child.reader.join(timeout=2)

    def _relay(self, child: _Child, process: subprocess.Popen[bytes]) -> None:
        label = child.program.name.ljust(self._width)
        output = process.stdout
        if output is None:  # _start always gives the process a pipe
            raise RuntimeError(f"{child.program.name} was started without a pipe for its output")
        for raw in output:
            line = raw.decode(errors="replace").rstrip("\n")
            self._write(f"{time.strftime('%H:%M:%S')} {label} | {line}")
        output.close()

    def _say(self, message: str) -> None:
        self._write(f"brain: {message}")

    def _write(self, line: str) -> None:
        with self._write_lock:
            _tell(line, self.out)


def _tell(line: str, stream: TextIO) -> None:
    """Write a line; a closed terminal or pipe must not stop the supervising (or the stop)."""
    with contextlib.suppress(OSError, ValueError):
        stream.write(line + "\n")
        stream.flush()


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _stop_with_parent() -> None:
    """In a child before it runs its program: SIGTERM when the supervisor dies, even by SIGKILL
    (Linux), so a killed `make run` leaves no server holding the port. Only a C call here: the
    child of a threaded parent must not take locks."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


if __name__ == "__main__":
    sys.exit(main())
