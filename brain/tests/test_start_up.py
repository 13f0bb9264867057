"""What a start loads (brain/apps.py, brain/settings.py, brain/cli.py): `django.setup()` loads
no admin module and no Celery, a command that reads loads nothing of the teaching path, and
what was left out is still there when it is needed — the admin with the URLs and the system
checks, Celery with the URLs and for beat's schedule.

Seen before: every command took 2.5-12.7 s on a busy 2-core machine, `django.setup()` was
about 24× a bare `import django`, and query commands printed an INFO line about the 8-bit
question model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from brain.testing import database_url

BASE = Path(settings.BASE_DIR)
OUR_ADMINS = ["knowledge.admin", "memory.admin", "review.admin", "agent.admin", "brain.admin"]
TEACHING = ["memory.actions", "knowledge.gate", "numpy", "onnxruntime", "celery", "httpx2"]


def _loaded(code: str, *, env: dict | None = None) -> dict:
    """Run ``code`` after ``django.setup()`` in a fresh process; it prints a JSON object."""
    ran = subprocess.run(
        [sys.executable, "-c", f"import django, json, sys\ndjango.setup()\n{code}"],
        cwd=BASE,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "brain.settings",
            "DATABASE_URL": database_url(connection.settings_dict),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_setting_up_loads_no_admin_module_and_no_celery():
    loaded = _loaded(
        f"print(json.dumps([m for m in {OUR_ADMINS + TEACHING!r} if m in sys.modules]))"
    )

    assert loaded == []


@pytest.mark.django_db(transaction=True)
def test_a_command_that_reads_loads_nothing_of_the_teaching_path(home):
    loaded = _loaded(
        "from django.core.management import call_command\n"
        "import io\n"
        "call_command('memory', 'list', stdout=io.StringIO())\n"
        f"print(json.dumps([m for m in {TEACHING!r} if m in sys.modules]))"
    )

    assert loaded == []


def _registered(how: str) -> dict:
    return _loaded(
        f"{how}\n"
        "from django.contrib import admin\n"
        "print(json.dumps({'registered': sorted(m._meta.label for m in admin.site._registry), "
        "'celery': 'celery' in sys.modules, 'header': str(admin.site.site_header)}))"
    )


def test_the_urls_bring_every_admin_registration_and_celery():
    with_urls = _registered("import brain.urls")
    every = _registered("from django.contrib import admin\nadmin.autodiscover()")

    assert with_urls["registered"] == every["registered"]
    assert "knowledge.Fact" in with_urls["registered"]
    assert with_urls["celery"] and with_urls["header"] == "brain administration"


def test_the_admin_checks_see_every_registration_without_the_urls():
    loaded = _loaded(
        "from django.core import checks\n"
        "issues = checks.run_checks(tags=[checks.Tags.admin])\n"
        "from django.contrib import admin\n"
        "print(json.dumps({'issues': [str(i) for i in issues], "
        "'registered': len(admin.site._registry)}))"
    )

    assert loaded["issues"] == []
    assert loaded["registered"] > 30


def test_beat_gets_a_crontab_for_every_entry_that_names_one():
    from celery.schedules import crontab

    from brain.celery import app

    schedule = app.conf.beat_schedule
    named = [name for name, entry in settings.CELERY_BEAT_SCHEDULE.items() if "crontab" in entry]

    assert named and all(isinstance(schedule[name]["schedule"], crontab) for name in named)
    assert schedule["memory-brief"]["schedule"] == crontab(hour=7, minute=0)
    assert all("crontab" not in entry for entry in schedule.values())
    assert schedule["worker-heartbeat"]["schedule"] == 60.0


@pytest.mark.django_db(transaction=True)
def test_a_question_at_the_terminal_prints_its_answer_and_no_log_lines(home):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "BRAIN_EMBEDDER": "minilm",
        "BRAIN_LOG_LEVEL": "INFO",
    }
    ran = subprocess.run(
        [str(BASE / "bin" / "brain"), "agent", "context", "where is the boiler"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr
    assert "INFO" not in ran.stdout + ran.stderr
    assert ran.stdout.strip()
