"""A write that loses its lock race on every attempt gets the same answer on every surface —
busy, nothing saved, send it again — never a 500: a 503 page, a toast for htmx, a tool error
for the agent (the API's 503 is in test_no_lost_write). Importing an export runs again after a
lost race, and its lock on the memory lets a fact be taught meanwhile."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import OperationalError, connection
from django.test import Client
from mcp import Client as McpClient

from brain.db import retry
from brain.testing import run_async
from knowledge import actions as knowledge_actions
from knowledge.models import Fact, Memory
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator, revisions
from memory.models import Change, DocumentRevision, InboxItem, Origin
from memory.taught import Statement
from surfaces import mcp_server, portable

BUSY = (
    "Other writes were saving at the same moment and this one could not get its turn; "
    "nothing was saved. Send it again in a moment."
)


@pytest.fixture
def home(transactional_db) -> Memory:
    """Writes commit for real: a retry only happens outside any outer transaction."""
    return Memory.objects.default()


@pytest.fixture
def curator(admin_user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    return client


def _filed(home, text: str) -> None:
    actions.learn(Statement.typed(memory=home, text=text, origin=Origin.TYPED))
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    consolidator.execute(run.pk)


# The pages -------------------------------------------------------------------------------------


def test_an_undo_that_loses_every_race_is_a_busy_page_and_changes_nothing(home, curator, races):
    _filed(home, "The loft is warm.")
    before = DocumentRevision.objects.current(home).text
    calls = races(revisions, "write_document", times=1_000)

    response = curator.post("/knowledge/changes/1/undo")

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert BUSY in response.content.decode()
    assert len(calls) == retry.ATTEMPTS
    assert DocumentRevision.objects.current(home).text == before
    assert Change.objects.get(number=1).undone_by is None


def test_teaching_with_htmx_that_loses_every_race_raises_a_busy_toast(home, curator, races):
    races(knowledge_actions, "file_fact", times=1_000)

    response = curator.post(
        "/knowledge/teach", {"text": "The loft is warm."}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert json.loads(response["HX-Trigger"]) == {"showToast": {"text": BUSY, "level": "warning"}}
    assert not Fact.objects.exists()
    assert not InboxItem.objects.exists()


def test_an_error_that_is_not_a_lost_race_is_not_called_busy(home, curator, monkeypatch):
    def broken(**kwargs):
        raise OperationalError("the disk is full")

    monkeypatch.setattr(revisions, "undo_change", broken)

    response = curator.post("/knowledge/changes/1/undo")

    assert response.status_code == 500
    assert BUSY not in response.content.decode()


# The agent -------------------------------------------------------------------------------------


def test_an_agent_whose_write_loses_every_race_is_told_to_send_it_again(home, races):
    races(knowledge_actions, "file_fact", times=1_000)
    server = mcp_server.build_server(home)
    results: list = []

    async def write() -> None:
        async with McpClient(server) as agent:
            results.append(await agent.call_tool("memory_write", {"content": "The loft is warm."}))

    run_async(write)

    (result,) = results
    assert result.is_error
    assert result.content[0].text.endswith(BUSY)
    assert not Fact.objects.exists()


# Importing an export ---------------------------------------------------------------------------


def test_an_import_that_loses_a_race_is_imported_once(home, races):
    other = Memory.objects.create(slug="cottage", name="Cottage")
    _filed(other, "The cottage loft is warm.")
    exported = portable.parse(portable.export_json(other, reader=SYSTEM))
    calls = races(revisions, "write_document", times=1)

    report = portable.import_memory(home, exported)

    assert len(calls) == 2
    assert "The cottage loft is warm." in DocumentRevision.objects.current(home).text
    assert DocumentRevision.objects.filter(memory=home).count() == 1
    assert any(line.startswith("Change log: 1 added") for line in report)


def test_importing_does_not_hold_up_a_fact_taught_at_the_same_moment(home, monkeypatch):
    other = Memory.objects.create(slug="cottage", name="Cottage")
    _filed(other, "The cottage loft is warm.")
    exported = portable.parse(portable.export_json(other, reader=SYSTEM))
    locked, go_on, errors = threading.Event(), threading.Event(), []
    bulk_create = Change.objects.bulk_create

    def bulk_create_then_wait(*args, **kwargs):
        created = bulk_create(*args, **kwargs)
        locked.set()  # the change log's lock on the memory is held until the import commits
        go_on.wait(timeout=30)
        return created

    monkeypatch.setattr(Change.objects, "bulk_create", bulk_create_then_wait)

    def load() -> None:
        try:
            portable.import_memory(home, exported)
        except Exception as error:  # reported by the assertion below
            errors.append(error)
        finally:
            connection.close()

    importing = threading.Thread(target=load)
    importing.start()
    try:
        assert locked.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            actions.add_to_inbox(memory=home, text="Sarah is a light sleeper.", origin="typed")
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    finally:
        go_on.set()
        importing.join(timeout=30)

    assert errors == []
    assert InboxItem.objects.filter(text="Sarah is a light sleeper.").exists()
