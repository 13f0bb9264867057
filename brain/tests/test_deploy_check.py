"""Production settings (DJANGO_DEBUG=0) pass Django's deployment checklist, the API schema's
checks included, with nothing to warn about; and only the test run hashes passwords the fast,
weak way."""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys

from django.conf import settings


def production(*command: str) -> subprocess.CompletedProcess:
    """``manage.py`` run as production runs it: debug off, a real secret key, one host, and
    none of the test run's own switches (the browser tests allow sync ORM calls from async)."""
    key = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(50))
    ours = {
        name: value for name, value in os.environ.items() if name != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env = {
        **ours,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": key,
        "DJANGO_ALLOWED_HOSTS": "example.org",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=settings.BASE_DIR,
    )


def test_the_deployment_checklist_finds_nothing_to_warn_about_in_production():
    done = production("check", "--deploy", "--fail-level", "WARNING")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr


def test_production_hashes_passwords_with_pbkdf2_and_only_the_tests_with_md5(alice):
    done = production(
        "shell",
        "-c",
        "from django.contrib.auth.hashers import make_password; print(make_password('x'))",
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("pbkdf2_sha256$"), done.stdout
    assert alice.password.startswith("md5$")
