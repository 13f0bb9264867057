"""Progress on long commands: one reporter (brain.progress) for `brain memory import`,
`brain entities sync-ha`, `make demo` and `brain reembed` — counted steps on one rewritten line
at a terminal, a dozen lines at most in a log, and a summary at the end."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from brain.progress import Progress
from brain.testing import database_url
from knowledge import reembedding
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory
from knowledge.read_layer import SYSTEM
from memory import actions
from memory.taught import Statement
from surfaces import portable

WRAPPER = Path(django_settings.BASE_DIR) / "bin" / "brain"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_log_the_count_is_a_line_at_each_tenth_and_the_summary_ends_it():
    log = io.StringIO()
    progress = Progress(log, 1000, "facts", label="Teaching")

    for _ in range(1000):
        progress.advance()
    progress.finish("Taught 1,000 facts.")

    lines = log.getvalue().splitlines()
    assert lines[0] == "Teaching 1/1,000 facts"
    assert "Teaching 312/1,000 facts" not in lines and "Teaching 300/1,000 facts" in lines
    assert lines[-2:] == ["Teaching 1,000/1,000 facts", "Taught 1,000 facts."]
    assert len(lines) <= 12


def test_at_a_terminal_the_count_is_one_line_rewritten_then_replaced_by_the_summary(monkeypatch):
    monkeypatch.setattr("brain.progress.TTY_EVERY_S", 0.0)
    terminal = Terminal()
    progress = Progress(terminal, 3, "entities", label="Syncing")

    for _ in range(3):
        progress.advance()
    progress.finish("3 added.")

    written = terminal.getvalue()
    assert written.count("\n") == 1 and written.endswith("3 added.\n")
    assert "\rSyncing 1/3 entities" in written and "\rSyncing 3/3 entities" in written


def test_a_total_learned_while_working_grows_the_count():
    log = io.StringIO()
    progress = Progress(log, 0, "entities", label="Syncing")
    progress.grow(2)

    progress.advance()
    progress.advance()

    assert log.getvalue().splitlines() == ["Syncing 1/2 entities", "Syncing 2/2 entities"]


@pytest.mark.django_db(transaction=True)
def test_brain_memory_import_counts_the_rows_in_a_real_shell_and_says_what_it_did(tmp_path):
    home = Memory.objects.default()
    for index in range(30):
        actions.learn(
            Statement.typed(memory=home, text=f"Shelf {index} holds {index} jars.", origin="typed")
        )
    exported = tmp_path / "home.json"
    exported.write_text(portable.export_json(home, reader=SYSTEM))
    Memory.objects.create(slug="other", name="Other")
    rows = portable.rows_in(portable.parse(exported.read_bytes()))
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}
    env["BRAIN_EMBEDDER"] = "hash"

    done = subprocess.run(
        [str(WRAPPER), "memory", "--memory", "other", "import", str(exported)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    counts = [line for line in lines if line.startswith("Importing ")]
    assert counts[-1] == f"Importing {rows:,}/{rows:,} rows"
    assert 2 <= len(counts) <= 12
    assert f"Imported {rows:,} rows into Other:" in lines
    assert Fact.objects.filter(memory__slug="other").count() == 30


def test_brain_reembed_counts_the_facts_it_brings_to_the_current_embedder(home):
    for index in range(5):
        actions.learn(
            Statement.typed(
                memory=home, text=f"Drawer {index} holds {index} spoons.", origin="typed"
            )
        )
    Fact.objects.update(embedder="an-older-embedder")
    out = io.StringIO()

    call_command("reembed", stdout=out)

    name = get_embedder().name
    lines = out.getvalue().splitlines()
    assert lines == [f"Re-embedding with {name} 5/5 facts", f"Re-embedded 5 facts with {name}."]
    assert not reembedding.stale_facts().exists()
    again = io.StringIO()
    call_command("reembed", stdout=again)
    assert again.getvalue() == f"Every fact already has a vector from {name}.\n"


def test_the_knowledge_tab_shows_re_embedding_while_it_runs_and_stops_polling_when_done(
    signed_in, home
):
    for index in range(4):
        actions.learn(
            Statement.typed(memory=home, text=f"Box {index} holds {index} screws.", origin="typed")
        )
    Fact.objects.filter(pk__in=Fact.objects.order_by("pk").values("pk")[:3]).update(
        embedder="an-older-embedder"
    )

    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    region = page[page.index('<div id="reembedding"') :]
    region = region[: region.index("</div>\n</div>") if "</div>\n</div>" in region else 600]
    assert 'hx-trigger="every 2s"' in region
    assert f"Re-embedding for {get_embedder().name}: 1/4 facts" in region

    reembedding.reembed_stale()
    polled = signed_in.get(reverse("memory:reembedding"), headers={"HX-Request": "true"})

    body = polled.content.decode()
    assert "Every fact is re-embedded." in body
    assert "hx-trigger" not in body
