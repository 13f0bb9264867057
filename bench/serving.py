"""A brain web server a benchmark starts on a free loopback port, and waits for.

``Served(argv, url=…, probe=…)`` starts ``argv`` (runserver, or gunicorn as ``make run`` serves)
against the benchmark's database and returns once ``probe`` answers anything at all: a refusal
(401, 403) is an answer, since what is waited for is the server, not the request. It gives up
after ``START_TIMEOUT_S`` (migrations are not run, but a cold first import of Django, the
models and the embedder takes tens of seconds on a loaded machine), or at once when the process
ends; either way it stops the process and raises RuntimeError naming the URL.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.db import connection

from brain.testing import database_url

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 15  # a graceful stop, then a kill


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Served:
    """``argv`` serving brain at ``url`` while the ``with`` block runs (see the module)."""

    def __init__(self, argv: list[str], *, url: str, probe: str, env: dict | None = None):
        self.argv, self.url, self.probe = argv, url, probe
        self.env = {**os.environ, **(env or {})}
        self.env["DATABASE_URL"] = database_url(connection.settings_dict)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Served:
        self.process = subprocess.Popen(
            self.argv,
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}{self.probe}", timeout=2):
                    return self
            except urllib.error.HTTPError:
                return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"{self.argv[0]} did not answer at {self.url}")

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
