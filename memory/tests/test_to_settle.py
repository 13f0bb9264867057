"""To settle: when the gate is not sure a new statement replaces an older one, both stay
believed and a person keeps the new one, the old one, or both — on the Knowledge tab, over the
API and from the terminal, each through ``actions.settle_conflict``."""

from __future__ import annotations

import io
import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect

from brain.testing import database_url
from knowledge import retrieval
from knowledge.models import Conflict, Fact, Memory
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

OLD = "The bike pump is kept in the shed."
NEW = "The bike pump is kept under the stairs."


@pytest.fixture(autouse=True)
def offline(settings):
    settings.ANTHROPIC_API_KEY = ""


def open_conflict(home: Memory, by=None) -> Conflict:
    actions.learn(Statement.typed(memory=home, text=OLD, origin=Origin.TYPED, by=by))
    new = actions.learn(Statement.typed(memory=home, text=NEW, origin=Origin.TYPED, by=by))
    assert new.verdict == "conflict", new.reason
    return new.conflict


def live_texts(home: Memory) -> set[str]:
    return set(Fact.objects.for_memory(home).live().values_list("text", flat=True))


def file_now(home: Memory) -> None:
    run = consolidator.request_consolidation(
        memory=home, trigger=ConsolidationRun.Trigger.CLI, send=False
    ).run
    consolidator.execute(run.pk)
    assert ConsolidationRun.objects.get(pk=run.pk).state == ConsolidationRun.State.FILED


def test_keeping_the_new_one_retires_the_old_one_and_its_line_leaves_the_document(home):
    actions.learn(Statement.typed(memory=home, text=OLD, origin=Origin.TYPED))
    file_now(home)
    new = actions.learn(Statement.typed(memory=home, text=NEW, origin=Origin.TYPED))
    conflict = new.conflict
    assert live_texts(home) == {OLD, NEW}

    settled = actions.settle_conflict(conflict=conflict, keep="new")

    assert live_texts(home) == {NEW}
    old = Fact.objects.get(text=OLD)
    assert old.superseded_by == new.fact
    assert "Kept “The bike pump is kept under the stairs.”" in settled.message
    file_now(home)
    text = DocumentRevision.objects.current(home).text
    assert NEW in text and OLD not in text
    assert "shed" not in retrieval.context(memory=home, question="bike pump", reader=SYSTEM).text


def test_keeping_the_old_one_forgets_the_new_one(home):
    conflict = open_conflict(home)
    actions.settle_conflict(conflict=conflict, keep="old")
    assert live_texts(home) == {OLD}
    assert not InboxItem.objects.filter(text=NEW, state=InboxItem.State.PENDING).exists()


def test_keeping_both_leaves_both_believed_and_the_list_empty(home):
    conflict = open_conflict(home)
    actions.settle_conflict(conflict=conflict, keep="both")
    assert live_texts(home) == {OLD, NEW}
    assert not Conflict.objects.to_settle().exists()


def test_a_conflict_settled_twice_says_who_settled_it_first(home, alice):
    conflict = open_conflict(home)
    actions.settle_conflict(conflict=conflict, keep="both", by=alice)
    with pytest.raises(actions.AlreadySettled, match="already settled by alice: kept both"):
        actions.settle_conflict(conflict=conflict, keep="new")


def test_a_conflict_whose_side_was_forgotten_no_longer_waits(home):
    conflict = open_conflict(home)
    actions.forget(fact=conflict.new)
    assert not Conflict.objects.to_settle().exists()


# Over the API ---------------------------------------------------------------------------------


def test_the_api_lists_and_settles_conflicts(client, admin_user, home):
    conflict = open_conflict(home)
    client.force_login(admin_user)

    listed = client.get("/api/memory/conflicts").json()
    assert [(c["id"], c["old"]["text"], c["new"]["text"]) for c in listed] == [
        (conflict.pk, OLD, NEW)
    ]

    bad = client.post(
        f"/api/memory/conflicts/{conflict.pk}/settle", {"keep": "newest"}, "application/json"
    )
    assert bad.status_code == 400
    assert "keep" in bad.json()

    done = client.post(
        f"/api/memory/conflicts/{conflict.pk}/settle", {"keep": "new"}, "application/json"
    )
    assert done.status_code == 200
    assert done.json()["resolution"] == "new"
    assert live_texts(home) == {NEW}

    again = client.post(
        f"/api/memory/conflicts/{conflict.pk}/settle", {"keep": "old"}, "application/json"
    )
    assert again.status_code == 409
    assert "already settled" in again.json()["detail"]
    assert client.get("/api/memory/conflicts").json() == []


# From the terminal ---------------------------------------------------------------------------


def test_the_cli_lists_and_settles_conflicts(home):
    conflict = open_conflict(home)
    out = io.StringIO()
    call_command("memory", "conflicts", stdout=out)
    assert f"#{conflict.pk}" in out.getvalue()
    assert f"old: {OLD}" in out.getvalue() and f"new: {NEW}" in out.getvalue()

    out = io.StringIO()
    call_command("memory", "settle", str(conflict.pk), "both", stdout=out)
    assert out.getvalue().startswith("Kept both")

    with pytest.raises(CommandError, match="already settled"):
        call_command("memory", "settle", str(conflict.pk), "new", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no conflict #999999"):
        call_command("memory", "settle", "999999", "new", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_brain_wrapper_settles_from_a_real_shell():
    home = Memory.objects.default()
    conflict = open_conflict(home)
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}
    wrapper = Path(django_settings.BASE_DIR) / "bin" / "brain"
    done = subprocess.run(
        [str(wrapper), "memory", "settle", str(conflict.pk), "old"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Kept “{OLD}”")
    assert live_texts(home) == {OLD}


# On the Knowledge tab -------------------------------------------------------------------------


def test_the_knowledge_tab_settles_a_conflict_without_javascript(client, admin_user, home):
    conflict = open_conflict(home)
    client.force_login(admin_user)
    page = client.get("/knowledge/").content.decode()
    assert "To settle" in page and OLD in page and NEW in page

    response = client.post(f"/knowledge/conflicts/{conflict.pk}/settle", {"keep": "new"})
    assert response.status_code == 302
    assert live_texts(home) == {NEW}
    page = client.get(response.url).content.decode()
    assert "To settle" not in page


def test_the_knowledge_tab_merges_a_conflict_into_one_statement_without_javascript(
    client, admin_user, home
):
    conflict = open_conflict(home)
    client.force_login(admin_user)
    page = client.get("/knowledge/").content.decode()
    assert "Keep both with dates" in page and "Merge them into one statement" in page

    response = client.post(
        f"/knowledge/conflicts/{conflict.pk}/settle",
        {"keep": "merged", "text": "The spare key is in the blue bowl by the door."},
    )

    assert response.status_code == 302
    assert live_texts(home) == {"The spare key is in the blue bowl by the door."}


def test_the_knowledge_tab_keeps_both_with_their_dates_and_refuses_a_day_that_is_not_one(
    client, admin_user, home
):
    conflict = open_conflict(home)
    client.force_login(admin_user)
    headers = {"HX-Request": "true"}

    refused = client.post(
        f"/knowledge/conflicts/{conflict.pk}/settle",
        {"keep": "dated", "since": "the third of March"},
        headers=headers,
    )
    assert "is not a day: write it as 2026-03-01" in refused.headers["HX-Trigger"]
    assert live_texts(home) == {OLD, NEW}

    month_ago = timezone.now() - timedelta(days=30)
    Fact.objects.filter(pk=conflict.old_id).update(valid_from=month_ago)
    since = (timezone.now() - timedelta(days=7)).date()
    kept = client.post(
        f"/knowledge/conflicts/{conflict.pk}/settle",
        {"keep": "dated", "since": since.isoformat()},
        headers=headers,
    )
    assert kept.status_code == 200
    conflict.refresh_from_db()
    assert conflict.state == "settled" and conflict.resolution == "dated"
    assert live_texts(home) == {NEW}
    old = Fact.objects.get(pk=conflict.old_id)
    assert timezone.localtime(old.valid_to).date() == since  # true until then, and kept


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_person_settles_a_conflict_on_the_knowledge_tab(signed_in_page):
    home = Memory.objects.default()
    conflict = open_conflict(home)
    page = signed_in_page
    page.goto("/knowledge/")
    settle = page.locator("#to-settle")
    expect(settle).to_contain_text("To settle")
    row = settle.locator(f"#conflict-{conflict.pk}")
    expect(row).to_contain_text(OLD)
    expect(row).to_contain_text(NEW)

    row.get_by_role("button", name="Keep the old one").click()

    expect(page.locator(".toast")).to_contain_text(f"Kept “{OLD}”")
    expect(settle).to_be_hidden()
    assert live_texts(home) == {OLD}
