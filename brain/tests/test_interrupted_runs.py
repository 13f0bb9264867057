"""`make test` right after an interrupted `make test` passes: a run stopped in the middle of a
transactional test (a timeout's SIGKILL, a Ctrl-C's SIGINT, a terminal closed) leaves the rows
that test committed in the reused test database, and the next run would fail on them ("Key
(username)=(sarah) already exists"). The next run finds the database left dirty and creates it
afresh before any test runs (conftest.py, ``brain.testing.left_dirty``).

Each case runs pytest for real, twice, on a test database of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from brain.embedded import BASE_DIR
from brain.testing import wait_until

INNER = "brain/tests/interrupted_run.py"
# Plugins the inner test has no use for, whose imports are a second of each run's start:
# Faker's and Hypothesis's.
UNUSED_PLUGINS = ["-p", "no:faker", "-p", "no:hypothesispytest"]


def _pytest(database: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNUSED_PLUGINS]
    return subprocess.Popen(
        [*command, "-q", INNER, *extra],
        cwd=BASE_DIR,
        env={**os.environ, "BRAIN_TEST_DATABASE": database, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finished(process: subprocess.Popen) -> tuple[int, str]:
    """Its exit code and output; a run still going after 4 minutes is killed, its group too,
    so a stuck run never outlives the test."""
    try:
        output, _ = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return -1, f"killed after 240 s:\n{output}"
    return process.returncode, output


@pytest.fixture
def database(request, django_db_blocker):
    """A test database of the case's own beside this run's, dropped afterwards."""
    from django.conf import settings
    from django.db import connection

    name = f"{settings.DATABASES['default']['TEST']['NAME']}_{request.node.callspec.id}"
    yield name
    with django_db_blocker.unblock(), connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["killed", "interrupted"])
def test_a_run_after_one_stopped_mid_way_passes(tmp_path, database, stop):
    committed = tmp_path / "committed"
    first = _pytest(
        database,
        "--create-db",
        env={"BRAIN_HANG_AFTER_COMMIT": str(committed)},
    )
    wait_until(committed.exists, timeout=180, message="the first run never committed its row")
    os.killpg(first.pid, stop)
    _finished(first)  # on SIGINT pytest ends its run; the test's teardown may or may not flush

    code, output = _finished(_pytest(database))

    assert code == 0, output
    assert "1 passed" in output
    assert f"the test database {database} was left dirty" in output

    code, output = _finished(_pytest(database))  # and a run after a whole one reuses it

    assert code == 0, output
    assert "left dirty" not in output
