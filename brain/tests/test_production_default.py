"""`make run` is production by default, `make dev` the developers' server; the first run shows
its install; /healthz knows the worker within seconds.

Seen before: `make run` served with DEBUG on, so `/pages/` showed Django's yellow 404 listing
every URL pattern; the first run was silent for about two minutes while pip installed; and
/healthz first said the worker was "unknown"."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error

import pytest
from django.conf import settings

from brain import install_progress
from brain.tests.test_make_run import MakeRun, _free_port

PIP_OUTPUT = """\
Collecting Django==6.1.3 (from -r requirements.txt (line 2))
  Downloading django-6.1.3-py3-none-any.whl.metadata (3.9 kB)
Collecting asgiref>=3.9.1 (from Django==6.1.3->-r requirements.txt (line 2))
  Using cached asgiref-3.11.0-py3-none-any.whl.metadata (9.3 kB)
Installing collected packages: asgiref, Django
Successfully installed Django-6.1.3 asgiref-3.11.0
"""


def test_the_install_is_shown_a_line_a_package_and_all_of_it_is_kept(tmp_path):
    import io

    out, log = io.StringIO(), io.StringIO()

    install_progress.progress(io.StringIO(PIP_OUTPUT), out, log)

    lines = out.getvalue().splitlines()
    assert lines[:2] == ["brain:     1  Django==6.1.3", "brain:     2  asgiref>=3.9.1"]
    assert lines[2] == "brain: installing 2 packages…"
    assert lines[3].startswith("brain: installed 2 packages in ")
    assert log.getvalue() == PIP_OUTPUT


def test_an_error_from_pip_is_shown_as_it_comes():
    import io

    out = io.StringIO()
    failing = "Collecting nothere==1.0\nERROR: No matching distribution found for nothere==1.0\n"

    install_progress.progress(io.StringIO(failing), out)

    assert out.getvalue().splitlines()[-1] == (
        "ERROR: No matching distribution found for nothere==1.0"
    )


def test_make_says_what_run_and_dev_are():
    helped = subprocess.run(
        ["make", "help"], cwd=settings.BASE_DIR, capture_output=True, text=True, check=True
    ).stdout

    assert "make run" in helped and "production, no debug pages" in helped
    assert "make dev" in helped and "debug" in helped.split("make dev", 1)[1].splitlines()[0]


@pytest.fixture
def make_run(transactional_db, tmp_path):
    brain = MakeRun(tmp_path, _free_port())
    del brain.env["DJANGO_DEBUG"]  # what a person types: no setting, production
    yield brain
    if brain.process and brain.process.poll() is None:
        brain.stop()


@pytest.mark.worker
def test_make_run_without_settings_serves_production_pages_and_knows_its_worker_at_once(
    make_run,
):
    make_run.start()
    first_answer = time.monotonic()

    with pytest.raises(urllib.error.HTTPError) as missing:
        make_run.get("/no-such-page/")

    body = missing.value.read().decode()
    assert missing.value.code == 404
    assert missing.value.headers["Server"].startswith("gunicorn")
    assert "Not found" in body and "/static/css/brain" in body
    assert "URLconf" not in body and "api/" not in body
    assert "production on loopback" in make_run.output

    def worker_known() -> dict | None:
        with make_run.get("/healthz") as response:
            worker = json.loads(response.read())["worker"]
        return worker if worker["status"] == "ok" else None

    make_run.wait(worker_known, timeout=60, what="/healthz never knew the worker")
    assert time.monotonic() - first_answer < 30  # beat's first heartbeat comes after 60 s

    # Where it serves, for `brain agent install` to point the hooks at, while it runs.
    serving = make_run.var / "serving.json"
    assert json.loads(serving.read_text())["url"] == make_run.url
    assert make_run.stop() == 0
    assert not serving.exists()
