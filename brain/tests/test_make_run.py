"""`make run`: one-line refusals when it cannot start; in production, gunicorn over plain http on
loopback; a supervisor that starts again what dies; a port check that tolerates TIME_WAIT."""

from __future__ import annotations

import fcntl
import http.cookiejar
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from brain import embedded, run, testing
from brain.embedded import BASE_DIR
from brain.testing import wait_until


def _run(env_overrides: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_overrides}
    return subprocess.run(
        [sys.executable, "-m", "brain.run"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_busy_port_is_named_with_how_to_fix_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run({"BRAIN_PORT": str(port), "BRAIN_VAR_DIR": str(tmp_path / "var")})

    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"brain: port {port} on 127.0.0.1 is already in use by another program: stop it, "
        f"or run `BRAIN_PORT={port + 1} make run`."
    )


def test_a_var_folder_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")

    result = _run({"BRAIN_VAR_DIR": str(blocker / "var")})

    assert result.returncode == 1
    assert result.stderr.startswith(f"brain: {blocker / 'var'} is not writable")
    assert "BRAIN_VAR_DIR" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_second_make_run_says_one_is_already_running(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    with open(var / "run.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        result = _run({"BRAIN_VAR_DIR": str(var)})

    assert result.returncode == 1
    assert result.stderr.strip().startswith("brain: brain is already running (make run, pid 4242)")


def test_make_run_without_python_3_12_says_what_is_needed(tmp_path):
    shutil.copy(BASE_DIR / "Makefile", tmp_path / "Makefile")
    for requirements in BASE_DIR.glob("requirements*.txt"):
        shutil.copy(requirements, tmp_path / requirements.name)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no pyenv, no python3.12

    result = subprocess.run(
        ["make", "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode != 0
    assert "brain needs Python 3.12 or newer" in result.stderr
    assert not (tmp_path / ".venv").exists()


def test_production_without_allowed_hosts_is_refused_in_one_line(tmp_path):
    result = _run(
        {"DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "", "BRAIN_VAR_DIR": str(tmp_path / "var")}
    )

    assert result.returncode == 1
    assert result.stderr.strip().startswith("brain: DJANGO_ALLOWED_HOSTS is empty")
    assert len(result.stderr.strip().splitlines()) == 1


def test_production_with_a_weak_secret_key_is_refused_in_one_line(tmp_path):
    result = _run(
        {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "secret", "BRAIN_VAR_DIR": str(tmp_path / "var")}
    )

    assert result.returncode == 1
    assert result.stderr.strip().startswith("brain: DJANGO_SECRET_KEY is too weak")
    assert len(result.stderr.strip().splitlines()) == 1


# The ports a stopped server leaves behind ------------------------------------------------------


def _left_in_time_wait() -> int:
    """A loopback port whose last connection waits in TIME_WAIT, as a stopped server leaves it:
    the serving side closed first, and nothing listens any more."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = listener.accept()
            served.close()
            assert client.recv(1) == b""
    return port


def _time_wait_on(port: int) -> bool:
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return any(row[1].endswith(f":{port:04X}") and row[3] == "06" for row in rows)


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free_to_serve_on():
    port = _left_in_time_wait()
    assert _time_wait_on(port)

    run.check_port_free(port)  # raises CannotStart when refused


def test_a_port_a_server_listens_on_is_refused_even_with_address_reuse():
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(run.CannotStart, match=f"port {port} on 127.0.0.1 is already in use"):
            run.check_port_free(port)


# The supervisor --------------------------------------------------------------------------------


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _supervise(programs, **options) -> tuple[int, list[str], run.Supervisor]:
    out = io.StringIO()
    supervisor = run.Supervisor(programs, env=dict(os.environ), cwd=BASE_DIR, out=out, **options)
    code = supervisor.run()
    return code, out.getvalue().splitlines(), supervisor


def test_a_process_that_exits_is_started_again_and_its_output_stays_labelled(tmp_path):
    runs = tmp_path / "runs"
    once = (
        f"import pathlib, sys, time; p = pathlib.Path({str(runs)!r}); n = len(p.read_text()) "
        "if p.exists() else 0; p.write_text('x' * (n + 1)); print(f'run {n + 1}', flush=True); "
        "sys.exit(3) if n == 0 else time.sleep(60)"
    )
    supervisor_box = {}

    def stop_when_restarted():
        wait_until(lambda: runs.exists() and runs.read_text() == "xx", timeout=20)
        time.sleep(0.3)
        supervisor_box["it"].stop()

    programs = [run.Program("flaky", _python(once))]
    out = io.StringIO()
    supervisor = run.Supervisor(
        programs, env=dict(os.environ), cwd=BASE_DIR, out=out, first_backoff_s=0.1
    )
    supervisor_box["it"] = supervisor
    threading.Thread(target=stop_when_restarted, daemon=True).start()

    assert supervisor.run() == 0
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines if "| run" in line] == [
        "flaky | run 1",
        "flaky | run 2",
    ]
    assert any("flaky exited with code 3" in line and "starting it again" in line for line in lines)


def test_a_process_that_keeps_crashing_is_given_up_on_in_one_line_and_the_rest_stop(tmp_path):
    steady_pid = tmp_path / "steady.pid"
    programs = [
        run.Program("crashy", _python("import sys; sys.exit(4)")),
        run.Program(
            "steady",
            _python(
                f"import os, pathlib, time; pathlib.Path({str(steady_pid)!r})"
                ".write_text(str(os.getpid())); time.sleep(60)"
            ),
        ),
    ]

    code, lines, _ = _supervise(programs, first_backoff_s=0.05, give_up_after=3)

    assert code == 1
    given_up = [line for line in lines if "crashed" in line]
    assert given_up == [
        "brain: crashy crashed 3 times in a row, each within 30 s of starting; "
        "stopping everything (its output above says why)."
    ]
    assert not embedded.pid_alive(int(steady_pid.read_text()))


def _supervisor_in_a_process(tmp_path, **popen) -> tuple[subprocess.Popen, Path]:
    """A supervisor of one long sleeper, in a process of its own; returns it and where the
    sleeper writes its pid."""
    pid_file = tmp_path / "sleeper.pid"
    sleeper = _python(
        f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))"
        "; time.sleep(120)"
    )
    script = (
        "import os, sys; from pathlib import Path; from brain import run; "
        f"sys.exit(run.Supervisor([run.Program('sleeper', {sleeper!r})], env=dict(os.environ), "
        "cwd=Path.cwd()).run_until_signalled())"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=BASE_DIR, **popen)
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=20)
    return process, pid_file


def test_when_the_supervisor_is_killed_outright_its_processes_stop_too(tmp_path):
    supervisor, pid_file = _supervisor_in_a_process(tmp_path, stdout=subprocess.DEVNULL)
    sleeper = int(pid_file.read_text())

    supervisor.kill()
    supervisor.wait(timeout=10)

    wait_until(lambda: not embedded.pid_alive(sleeper), timeout=10, message="left running")


def test_a_supervisor_whose_output_was_closed_still_stops_everything(tmp_path):
    supervisor, pid_file = _supervisor_in_a_process(tmp_path, stdout=subprocess.PIPE)
    sleeper = int(pid_file.read_text())
    supervisor.stdout.close()  # the terminal or the pipe it wrote to went away

    supervisor.terminate()

    assert supervisor.wait(timeout=30) == 0
    assert not embedded.pid_alive(sleeper)


# `make run` in production ----------------------------------------------------------------------

ADMIN_PASSWORD = "a long loopback password"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class MakeRun:
    """`python -m brain.run` with DJANGO_DEBUG=0 on a port and var folder of its own, against
    this test run's database (migrated already) and an embedded Valkey in its var folder."""

    def __init__(self, tmp_path, port: int):
        from django.db import connection

        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.var = tmp_path / "var"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_SECURE", "REDIS_URL", "BRAIN_WEB_"))
        }
        self.env = {
            **env,
            "DJANGO_DEBUG": "0",
            "BRAIN_PORT": str(port),
            "BRAIN_VAR_DIR": str(self.var),
            "DATABASE_URL": testing.database_url(connection.settings_dict),
            "BRAIN_EMBEDDER": "hash",
            "BRAIN_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "BRAIN_WEB_WORKERS": "2",
            "PYTHONUNBUFFERED": "1",
        }
        self.lines: list[str] = []
        self.process: subprocess.Popen | None = None

    def start(self) -> MakeRun:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "brain.run"],
            cwd=BASE_DIR,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        self.wait(self.answers, timeout=120, what="make run never answered")
        return self

    def wait(self, condition, *, timeout: float, what: str) -> None:
        try:
            wait_until(condition, timeout=timeout, interval=0.5)
        except AssertionError:
            raise AssertionError(f"{what}:\n{self.tail}") from None

    def _collect(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def tail(self) -> str:
        return "\n".join(self.lines[-60:])

    def get(self, path: str, opener=None):
        return (opener or urllib.request.build_opener()).open(self.url + path, timeout=10)

    def answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"make run exited ({self.process.returncode}):\n{self.tail}")
        try:
            with self.get("/healthz") as response:
                response.read()  # closing with unread bytes would reset the connection
                return response.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=60)
        finally:
            self.process.stdout.close()

    def descendants(self) -> list[int]:
        return _descendants(self.process.pid)

    def main_worker_pid(self) -> int | None:
        """The Celery worker's main process (its pool's children have a worker as parent)."""
        workers = [pid for pid in self.descendants() if _is_celery_worker(pid)]
        mains = [pid for pid in workers if _parent(pid) not in workers]
        return mains[0] if len(mains) == 1 else None


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _descendants(root: int) -> list[int]:
    parents = {int(entry): _parent(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()}
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return [pid for pid in found if embedded.pid_alive(pid)]


def _is_celery_worker(pid: int, queue: str = run.DEFAULT_QUEUE) -> bool:
    """A process of the worker taking ``queue`` (`make run` has one for compiling too)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError:
        return False
    celery = any(arg.endswith(b"celery") for arg in argv) and b"worker" in argv
    return celery and queue.encode() in argv


@pytest.fixture(scope="module")
def running(django_db_setup, django_db_blocker, tmp_path_factory):
    """One `make run` in production for the module's tests, started once: each start is
    migrate, ensure_admin, collectstatic and four programs coming up, the larger part of every
    test here. It writes to the test database (the admin account, its workers' rows), which is
    flushed once it has stopped, as a transactional test's rows are."""
    from django.core.management import call_command

    brain = MakeRun(tmp_path_factory.mktemp("make-run"), _free_port())
    yield brain
    if brain.process and brain.process.poll() is None:
        brain.stop()
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def production(running):
    """The module's `make run`, started (again, after a test that stopped it)."""
    if running.process is None or running.process.poll() is not None:
        running.start()
    return running


def _sign_in(brain: MakeRun) -> str:
    """Sign in through the login form as a browser would, cookies and CSRF token included."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with brain.get("/login/", opener) as response:
        form = response.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    body = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token, "username": "admin", "password": ADMIN_PASSWORD}
    ).encode()
    request = urllib.request.Request(brain.url + "/login/", data=body, method="POST")
    request.add_header("Referer", brain.url + "/login/")
    with opener.open(request, timeout=10) as response:
        assert response.url == brain.url + "/", response.url
        return response.read().decode()


@pytest.mark.worker
def test_in_production_make_run_serves_through_gunicorn_over_plain_http_on_loopback(production):
    with production.get("/healthz") as response:
        assert response.headers["Server"].startswith("gunicorn")
        assert json.loads(response.read())["status"] == "ok"
    with production.get("/static/vendor/htmx-2.0.11.min.js") as response:
        assert response.status == 200
    assert "Sign out" in _sign_in(production)


@pytest.mark.worker
def test_a_killed_worker_is_started_again_while_the_web_keeps_answering(production):
    production.wait(lambda: "ready." in production.output, timeout=60, what="no worker ready")
    worker = production.main_worker_pid()
    answered = []
    # At least two readies in all, and one more than before the kill (the server may have
    # served a test before this one).
    ready_before = max(production.output.count("ready."), 1)

    os.kill(worker, signal.SIGKILL)

    def restarted() -> bool:
        answered.append(production.answers())
        again = production.main_worker_pid()
        return again not in (None, worker) and production.output.count("ready.") > ready_before

    production.wait(restarted, timeout=60, what="the worker was not started again")
    assert all(answered), f"the web stopped answering:\n{production.tail}"
    assert "brain: worker was killed by SIGKILL" in production.output


@pytest.mark.worker
def test_stopping_make_run_stops_everything_and_it_can_start_again_at_once(production):
    # A connection gunicorn closed first waits in TIME_WAIT on the port (the client closes
    # first as often: ask until one does).
    production.wait(
        lambda: production.answers() and _time_wait_on(production.port),
        timeout=30,
        what="no connection was left in TIME_WAIT",
    )
    children = production.descendants()
    valkey = int((production.var / "valkey" / "valkey.pid").read_text())

    assert production.stop() == 0

    assert [pid for pid in children if embedded.pid_alive(pid)] == []
    assert not embedded.pid_alive(valkey)
    assert _time_wait_on(production.port)
    production.start()
    assert production.answers()
