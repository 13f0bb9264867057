"""`brain memory consolidate` when the model is out: one line saying so, a non-zero exit, and the
queue as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

from brain.testing import database_url
from brain.tests.stubs.messages import TEST_API_KEY, stub_error, stub_overloaded
from knowledge.models import Memory
from memory import actions
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin

WRAPPER = Path(django_settings.BASE_DIR) / "bin" / "brain"


@pytest.fixture
def home(transactional_db) -> Memory:
    """The command runs in its own process: what it reads must be committed."""
    return Memory.objects.default()


def _consolidate(llm_stub) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "BRAIN_EMBEDDER": "hash",
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": llm_stub.base_url,
        "BRAIN_LLM_MAX_RETRIES": "0",
    }
    return subprocess.run(
        [str(WRAPPER), "memory", "consolidate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (stub_overloaded(), "Overloaded"),
        (stub_error(500, "api_error", "Internal server error"), "Internal server error"),
    ],
)
def test_consolidate_during_a_model_outage_says_so_in_one_line_and_exits_non_zero(
    home, llm_stub, reply, said
):
    llm_stub.script(reply)
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.TERMINAL)

    finished = _consolidate(llm_stub)

    assert finished.returncode != 0
    assert finished.stdout == ""
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, finished.stderr
    assert lines[0].startswith("CommandError: Failed: ")
    assert said in lines[0]
    assert "Traceback" not in finished.stderr
    assert len(llm_stub.requests) == 1
    run = ConsolidationRun.objects.get()
    assert run.state == "failed"
    assert InboxItem.objects.pending().count() == 1
    assert not DocumentRevision.objects.filter(memory=home).exists()
