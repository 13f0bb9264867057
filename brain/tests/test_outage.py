"""The database going away under real writers is never a 500: `make run` in production (gunicorn,
DJANGO_DEBUG=0) in a var folder of its own, with a PostgreSQL of its own that the test stops
while ten writers post to the API.

Seen before: under about ten concurrent writers, stopping the embedded PostgreSQL gave 13 of 249
writes a 500 with the DEBUG traceback page and no Retry-After (recovery itself was automatic).

Never the PostgreSQL or Valkey other test runs use: each server here lives under tmp_path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from brain.embedded import BASE_DIR
from brain.testing import wait_until
from brain.tests.test_make_run import ADMIN_PASSWORD, MakeRun, _free_port

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WRITERS = 10


def _embedded(var: Path, code: str) -> str:
    """Run ``code`` against the embedded servers of ``var`` in a process of its own."""
    ran = subprocess.run(
        [sys.executable, "-c", f"from brain import embedded\n{code}"],
        cwd=BASE_DIR,
        env={**os.environ, "BRAIN_VAR_DIR": str(var)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip()


class Answer:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def __repr__(self) -> str:
        return f"<{self.status} {self.body[:120]!r}>"


def _call(brain: MakeRun, path: str, *, token: str = "", body: dict | None = None, headers=None):
    request = urllib.request.Request(
        brain.url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method="POST" if body is not None else "GET",
        headers={**({"Authorization": f"Token {token}"} if token else {}), **(headers or {})},
    )
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Answer(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, dict(error.headers), error.read())


class Writers:
    """``WRITERS`` threads teaching brain one new sentence after another through the API."""

    def __init__(self, brain: MakeRun, token: str):
        self.brain, self.token = brain, token
        self.answers: list[Answer] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(WRITERS)]

    def _write(self, writer: int) -> None:
        count = 0
        while not self.stop.is_set():
            count += 1
            sentence = f"Writer {writer} filed note {count} in drawer {writer * 1000 + count}."
            try:
                answer = _call(
                    self.brain, "/api/memory/add", token=self.token, body={"fact": sentence}
                )
            except OSError as error:  # the connection itself failed: never what a 503 is for
                self.errors.append(f"{type(error).__name__}: {error}")
                continue
            self.answers.append(answer)

    def __enter__(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)

    def since(self, start: int) -> list[Answer]:
        return self.answers[start:]


def _check_every_answer(answers: list[Answer]) -> Counter:
    """Every answer is a write done (2xx) or a 503 with Retry-After and a JSON detail."""
    statuses = Counter(answer.status for answer in answers)
    wrong = [a for a in answers if a.status // 100 != 2 and a.status != 503]
    assert not wrong, (statuses, wrong[:5])
    for answer in (a for a in answers if a.status == 503):
        assert int(answer.headers["Retry-After"]) >= 1
        assert json.loads(answer.body)["detail"].startswith(("brain is restarting", "Other writes"))
    return statuses


class Cluster:
    """A PostgreSQL data folder, stopped, migrated, with the admin account and its API token:
    what `make run` leaves in its var folder once it has started. Made once for the module;
    each test starts a copy of its own, so neither waits for initdb and every migration."""

    def __init__(self, folder: Path):
        self.folder = folder
        # The settings' embedded PostgreSQL (no DATABASE_URL) in ``folder``: the connection
        # starts it, as `make run`'s first migrate does.
        env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
        made = subprocess.run(
            [sys.executable, "-c", _MAKE_CLUSTER],
            cwd=BASE_DIR,
            env={**env, "BRAIN_VAR_DIR": str(folder), "BRAIN_ADMIN_PASSWORD": ADMIN_PASSWORD},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        self.token = made.stdout.split()[-1]
        # Stopped from a process of its own, once nothing of the one that made it can connect
        # (a connection starts the embedded server again): a copy of a running server's
        # folder would not start.
        _embedded(folder, "embedded.postgres.stop()")
        assert not (folder / "postgres" / "postmaster.pid").exists()

    def copy_to(self, var: Path) -> None:
        """The cluster as ``var``'s embedded PostgreSQL (owners and modes kept, as initdb set
        them)."""
        var.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(self.folder / "postgres"), str(var)], check=True)


_MAKE_CLUSTER = """
import io, os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")
django.setup()
from django.core.management import call_command
from django.db import connections
from brain import embedded
embedded.postgres.ensure_running()
call_command("migrate", "--noinput", verbosity=0)
call_command("ensure_admin", stdout=io.StringIO())
said = io.StringIO()
call_command("drf_create_token", "admin", stdout=said)
connections.close_all()
print(said.getvalue().split()[2])
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """In a folder of its own under /tmp rather than pytest's: a pytest starting meanwhile (any
    run on the machine) makes pytest's folder private again, out of the postgres account's
    reach."""
    with tempfile.TemporaryDirectory(prefix="brain-cluster-") as folder:
        yield Cluster(Path(folder) / "var")


def _start(tmp_path, cluster: Cluster, env: dict | None = None, *, embedded: bool) -> MakeRun:
    brain = MakeRun(tmp_path, _free_port())
    if embedded:
        del brain.env["DATABASE_URL"]  # make run's own embedded PostgreSQL, in its var folder
        cluster.copy_to(brain.var)
    brain.env.update(env or {})
    brain.start()
    brain.token = cluster.token
    return brain


@pytest.fixture
def servers():
    started: list[MakeRun] = []
    yield started
    for brain in started:
        if brain.process and brain.process.poll() is None:
            brain.stop()


def test_stopping_the_embedded_postgresql_under_ten_writers_gives_no_500(
    tmp_path, cluster, servers
):
    brain = _start(tmp_path, cluster, embedded=True)
    servers.append(brain)
    pid_before = _embedded(brain.var, "print(embedded.postgres.running_pid())")

    with Writers(brain, brain.token) as writers:
        wait_until(lambda: len(writers.answers) >= 30, timeout=120, message="no writes")
        _embedded(brain.var, "embedded.postgres.stop()")
        stopped_at = len(writers.answers)
        # The next connection starts it again (brain.db.embedded): recovery is automatic.
        wait_until(
            lambda: any(a.status == 201 for a in writers.since(stopped_at + WRITERS)),
            timeout=120,
            message="writes never succeeded again",
        )

    assert _embedded(brain.var, "print(embedded.postgres.running_pid())") != pid_before
    statuses = _check_every_answer(writers.answers)
    assert statuses[201] >= 30
    assert not writers.errors, writers.errors[:5]


def test_while_the_database_is_away_the_api_pages_and_htmx_answer_503_then_recover(
    tmp_path, cluster, servers
):
    """A PostgreSQL of the test's own, named by DATABASE_URL (as a deployment's is), so it
    stays stopped until the test starts it again."""
    database = tmp_path / "db"
    cluster.copy_to(database)
    _embedded(database, "embedded.postgres.ensure_running()")
    socket_dir = _embedded(database, "print(embedded.postgres.socket_dir)")
    url = f"postgres://postgres@{quote(socket_dir, safe='')}/brain"
    try:
        brain = _start(tmp_path, cluster, {"DATABASE_URL": url}, embedded=False)
        servers.append(brain)
        cookie_jar_opener = _signed_in_opener(brain)

        with Writers(brain, brain.token) as writers:
            wait_until(lambda: len(writers.answers) >= 20, timeout=120, message="no writes")
            _embedded(database, "embedded.postgres.stop()")
            stopped_at = len(writers.answers)
            wait_until(
                lambda: sum(a.status == 503 for a in writers.since(stopped_at)) >= 20,
                timeout=60,
                message="no 503 while the database was stopped",
            )
            page = _opened(cookie_jar_opener, brain.url + "/")
            partial = _opened(cookie_jar_opener, brain.url + "/knowledge/facts", htmx=True)
            _embedded(database, "embedded.postgres.ensure_running()")
            restarted_at = len(writers.answers)
            wait_until(
                lambda: sum(a.status == 201 for a in writers.since(restarted_at)) >= 10,
                timeout=60,
                message="writes never succeeded again",
            )
    finally:
        _embedded(database, "embedded.postgres.stop()")

    statuses = _check_every_answer(writers.answers)
    assert statuses[503] >= 20 and statuses[201] >= 30
    assert not writers.errors, writers.errors[:5]
    assert page.status == 503 and int(page.headers["Retry-After"]) >= 1
    assert b"brain is restarting" in page.body and b"Traceback" not in page.body
    assert partial.status == 503 and int(partial.headers["Retry-After"]) >= 1
    toast = json.loads(partial.headers["HX-Trigger"])["showToast"]
    assert toast["level"] == "warning" and toast["text"].startswith("brain is restarting")


def _signed_in_opener(brain: MakeRun):
    """An opener holding a signed-in session, as a browser would after the login form."""
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _sign_in_with(brain, opener)
    return opener


def _sign_in_with(brain: MakeRun, opener) -> None:
    with opener.open(brain.url + "/login/", timeout=30) as response:
        form = response.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    body = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token, "username": "admin", "password": ADMIN_PASSWORD}
    ).encode()
    request = urllib.request.Request(brain.url + "/login/", data=body, method="POST")
    request.add_header("Referer", brain.url + "/login/")
    with opener.open(request, timeout=30) as response:
        assert response.url == brain.url + "/", response.url


def _opened(opener, url: str, *, htmx: bool = False) -> Answer:
    request = urllib.request.Request(url, headers={"HX-Request": "true"} if htmx else {})
    try:
        with opener.open(request, timeout=60) as response:
            return Answer(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, dict(error.headers), error.read())
