"""A person's change to the document while a pass is filing applies at once, on every surface:
the pass that composed from the older document notices at its commit, writes nothing, and a new
pass files what was waiting. No surface answers 500."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from brain.testing import wait_until
from knowledge import actions as knowledge_actions
from knowledge.models import Fact, Memory
from memory import actions, consolidator, document
from memory.composers.offline import OfflineComposer
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

LOFT = "The loft is warm."
SARAH = "Sarah is a light sleeper."


@pytest.fixture
def home(transactional_db) -> Memory:
    """Two connections at once: the pass's and the person's; every write commits for real."""
    return Memory.objects.default()


@pytest.fixture
def curator(admin_user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    return client


def _text(home) -> str:
    return DocumentRevision.objects.current(home).text


def _file(home, *texts: str) -> None:
    for text in texts:
        actions.learn(Statement.typed(memory=home, text=text, origin=Origin.TYPED))
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    consolidator.execute(run.pk)
    assert ConsolidationRun.objects.get(pk=run.pk).state == "filed"


def _meanwhile(work: Callable) -> Future:
    """Run ``work`` on a connection of its own, as a second person's request would."""
    future: Future = Future()

    def target() -> None:
        try:
            future.set_result(work())
        except BaseException as error:  # re-raised by future.result() in the test
            future.set_exception(error)
        finally:
            connection.close()

    threading.Thread(target=target, daemon=True).start()
    return future


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


@contextmanager
def a_pass_committing(home, monkeypatch) -> Iterator[ConsolidationRun]:
    """A pass filing SARAH that holds the document in its commit until the block ends: a
    person's write sent inside the block reaches the document lock while the pass has it."""
    actions.learn(Statement.typed(memory=home, text=SARAH, origin=Origin.TYPED))
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    in_commit, go_on = threading.Event(), threading.Event()
    reconcile = knowledge_actions.reconcile_with_document

    def reconcile_slowly(**kwargs):
        if not kwargs.get("by_person"):
            in_commit.set()
            go_on.wait(timeout=30)
        return reconcile(**kwargs)

    monkeypatch.setattr(knowledge_actions, "reconcile_with_document", reconcile_slowly)
    filing = _meanwhile(lambda: consolidator.execute(run.pk))
    assert in_commit.wait(timeout=30), "the pass never reached its commit"
    try:
        yield run
        wait_until(_waiting_on_a_lock, timeout=10, message="the write never met the pass")
    finally:
        go_on.set()
        filing.result(timeout=30)


@contextmanager
def a_pass_composing(home, monkeypatch) -> Iterator[ConsolidationRun]:
    """A pass filing SARAH whose composer is thinking until the block ends."""
    actions.learn(Statement.typed(memory=home, text=SARAH, origin=Origin.TYPED))
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    thinking, go_on = threading.Event(), threading.Event()
    offline = OfflineComposer()

    class Slow:
        name = "offline"

        def compose(self, request, *, timeout=None):
            thinking.set()
            go_on.wait(timeout=30)
            return offline.compose(request, timeout=timeout)

    monkeypatch.setattr("memory.consolidator.get_composer", lambda memory=None: Slow())
    filing = _meanwhile(lambda: consolidator.execute(run.pk))
    assert thinking.wait(timeout=30), "the pass never asked its composer"
    try:
        yield run
    finally:
        go_on.set()
        filing.result(timeout=30)
    monkeypatch.setattr("memory.consolidator.get_composer", lambda memory=None: offline)


def _file_what_waits(home) -> None:
    """Run the pass the previous one asked for (a retry), as the worker would."""
    again = ConsolidationRun.objects.running().get(memory=home)
    assert again.trigger == ConsolidationRun.Trigger.RETRY
    consolidator.execute(again.pk)
    assert ConsolidationRun.objects.get(pk=again.pk).state == "filed"


# Undo ------------------------------------------------------------------------------------------


def test_undo_over_the_api_while_a_pass_commits_applies_on_top_of_what_it_filed(
    home, curator, monkeypatch
):
    _file(home, LOFT)

    with a_pass_committing(home, monkeypatch):
        undone = _meanwhile(lambda: curator.post("/api/memory/changes/1/undo"))

    response = undone.result(timeout=30)
    assert response.status_code == 200, response.content
    assert response.json()["summary"] == f"Undid change #1: Added under Rooms: “{LOFT}”"
    assert LOFT not in _text(home)
    assert SARAH in _text(home)


def test_undo_on_the_page_while_a_pass_commits_applies_and_says_so(home, curator, monkeypatch):
    _file(home, LOFT)

    with a_pass_committing(home, monkeypatch):
        undone = _meanwhile(
            lambda: curator.post("/knowledge/changes/1/undo", headers={"HX-Request": "true"})
        )

    response = undone.result(timeout=30)
    assert response.status_code == 200, response.content
    assert "Undone: change #1" in response.headers["HX-Trigger"]
    assert LOFT not in _text(home)
    assert SARAH in _text(home)


def test_undo_without_javascript_while_a_pass_commits_applies(home, curator, monkeypatch):
    _file(home, LOFT)

    with a_pass_committing(home, monkeypatch):
        undone = _meanwhile(lambda: curator.post("/knowledge/changes/1/undo", follow=True))

    response = undone.result(timeout=30)
    assert response.status_code == 200
    assert "Undone: change #1" in response.content.decode()
    assert LOFT not in _text(home)


def test_undo_from_the_terminal_while_a_pass_commits_applies(home, monkeypatch):
    _file(home, LOFT)

    def undo() -> str:
        out = io.StringIO()
        call_command("memory", "undo", "1", stdout=out, stderr=io.StringIO())
        return out.getvalue()

    with a_pass_committing(home, monkeypatch):
        undone = _meanwhile(undo)

    assert undone.result(timeout=30) == f"#3  Undid change #1: Added under Rooms: “{LOFT}”\n"
    assert LOFT not in _text(home)
    assert SARAH in _text(home)


def test_an_undo_while_a_pass_composes_wins_and_the_waiting_item_is_filed_next(
    home, curator, monkeypatch
):
    _file(home, LOFT)

    with a_pass_composing(home, monkeypatch) as run:
        response = curator.post("/api/memory/changes/1/undo")
        assert response.status_code == 200, response.content

    run.refresh_from_db()
    assert run.state == "failed"
    assert run.reason.startswith("The document was edited while the pass ran (an edit, an undo")
    assert InboxItem.objects.for_memory(home).pending().count() == 1
    _file_what_waits(home)
    assert LOFT not in _text(home)
    assert SARAH in _text(home)
    assert Fact.objects.get(text=LOFT).status == Fact.Status.FORGOTTEN


# Clear, edit and forget ------------------------------------------------------------------------


def test_clearing_from_the_terminal_while_a_pass_commits_clears(home, monkeypatch):
    _file(home, LOFT)

    def clear() -> str:
        out = io.StringIO()
        call_command("memory", "clear", "--confirm", stdout=out, stderr=io.StringIO())
        return out.getvalue()

    with a_pass_committing(home, monkeypatch):
        cleared = _meanwhile(clear)

    assert cleared.result(timeout=30).startswith("#3  Cleared the memory document")
    assert _text(home) == document.TEMPLATE


def test_an_edit_over_the_api_while_a_pass_composes_is_saved_and_the_pass_files_after_it(
    home, curator, monkeypatch
):
    _file(home, LOFT)
    mine = _text(home).replace("## House\n", "## House\n\n- The cellar floods in March.\n")

    with a_pass_composing(home, monkeypatch) as run:
        response = curator.put(
            "/api/memory/",
            {"text": mine, "base_generation": 1},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content

    run.refresh_from_db()
    assert run.state == "failed"
    _file_what_waits(home)
    text = _text(home)
    assert "The cellar floods in March." in text
    assert LOFT in text
    assert SARAH in text


def test_an_edit_on_the_page_while_a_pass_composes_is_saved(home, curator, monkeypatch):
    _file(home, LOFT)
    mine = _text(home).replace("## House\n", "## House\n\n- The cellar floods in March.\n")

    with a_pass_composing(home, monkeypatch):
        response = curator.post(
            "/knowledge/document/save", {"text": mine, "base_generation": "1"}, follow=True
        )
        assert response.status_code == 200
        assert "Saved your edit." in response.content.decode()

    _file_what_waits(home)
    assert "The cellar floods in March." in _text(home)
    assert SARAH in _text(home)


def test_an_edit_of_a_document_a_pass_filed_into_since_keeps_both(home, curator):
    _file(home, LOFT)
    mine = _text(home).replace("## House\n", "## House\n\n- The cellar floods in March.\n")
    _file(home, SARAH)  # while the person was typing

    response = curator.put(
        "/api/memory/", {"text": mine, "base_generation": 1}, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    text = _text(home)
    assert "- The cellar floods in March.\n" in text
    assert f"- {SARAH}\n" in text
    assert f"- {LOFT}\n" in text
    edit = Change.objects.for_memory(home).order_by("number").last()
    assert edit.summary == "You edited the document: added “The cellar floods in March.”"


def test_an_edit_of_a_line_a_pass_changed_since_is_a_409_with_the_document_now(home, curator):
    _file(home, "The bedroom is kept at 19 degrees at night.")
    mine = _text(home).replace("19 degrees", "18 degrees")
    _file(home, "The bedroom is kept at 21 degrees at night.")

    response = curator.put(
        "/api/memory/", {"text": mine, "base_generation": 1}, content_type="application/json"
    )

    assert response.status_code == 409
    assert response.json()["current"]["generation"] == 2
    assert "21 degrees" in _text(home)
    assert "18 degrees" not in _text(home)


def test_an_edit_on_the_page_of_a_line_a_pass_changed_since_shows_both_to_merge(home, curator):
    _file(home, "The bedroom is kept at 19 degrees at night.")
    mine = _text(home).replace("19 degrees", "18 degrees")
    _file(home, "The bedroom is kept at 21 degrees at night.")

    response = curator.post("/knowledge/document/save", {"text": mine, "base_generation": "1"})

    assert response.status_code == 200
    page = response.content.decode()
    assert "The document changed since you opened the editor" in page
    assert "18 degrees" in page and "21 degrees" in page
    assert "18 degrees" not in _text(home)


def test_forgetting_a_fact_a_pass_is_filing_keeps_it_out_of_the_document(
    home, curator, monkeypatch
):
    _file(home, LOFT)

    with a_pass_composing(home, monkeypatch) as run:
        sarah = Fact.objects.get(text=SARAH)
        response = curator.post(f"/api/memory/facts/{sarah.pk}/forget")
        assert response.status_code == 200, response.content

    run.refresh_from_db()
    assert run.state == "failed"
    assert not InboxItem.objects.for_memory(home).pending().exists()
    assert SARAH not in _text(home)
    assert LOFT in _text(home)


# Merging two versions of one document ------------------------------------------------------------


def test_two_versions_that_made_the_same_change_merge_into_one():
    base = document.TEMPLATE
    both = base.replace("## Rooms\n", "## Rooms\n\n- The loft is warm.\n")

    assert document.merge(base, both, both) == both


def test_changes_to_neighbouring_lines_are_left_to_a_person():
    base = "# Memory\n\n## Rooms\n\n- The loft is warm.\n- The cellar is damp.\n"
    mine = base.replace("- The loft is warm.\n", "- The loft is cold.\n")
    theirs = base.replace("- The cellar is damp.\n", "- The cellar is dry.\n")

    with pytest.raises(document.CannotApply, match="both versions changed the lines at"):
        document.merge(base, mine, theirs)
