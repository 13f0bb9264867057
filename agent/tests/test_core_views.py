"""The pinned core on the Knowledge tab (a small form that works without JavaScript, and an htmx
partial named after its DOM id) and in the admin."""

from __future__ import annotations

import pytest

from agent import actions
from knowledge.models import Membership, Memory, Permission

CORE = "You work for Priya Shah's data team.\nNever push to main without a review."


@pytest.fixture
def curator(client, home, alice):
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    client.force_login(alice)
    return client


def test_the_settings_page_shows_the_core_in_a_form(curator, home):
    Memory.objects.filter(pk=home.pk).update(core=CORE)

    page = curator.get("/settings/").content.decode()

    assert 'id="core"' in page
    assert 'action="/knowledge/core"' in page
    assert "Never push to main without a review." in page


def test_saving_the_core_without_javascript_redirects_back_with_a_message(curator, home):
    response = curator.post("/knowledge/core", {"text": CORE}, follow=True)

    home.refresh_from_db()
    assert home.core == CORE
    assert response.redirect_chain[-1][0] == "/settings/#core"
    assert "Saved the core" in response.content.decode()


def test_saving_the_core_with_htmx_swaps_only_the_core(curator, home):
    response = curator.post("/knowledge/core", {"text": CORE}, headers={"HX-Request": "true"})

    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="core"')
    assert "Never push to main without a review." in body
    assert "showToast" in response["HX-Trigger"]


def test_a_core_that_is_too_long_is_refused_and_the_text_kept(curator, home):
    too_long = "Always answer in French. " * 50

    response = curator.post("/knowledge/core", {"text": too_long}, headers={"HX-Request": "true"})

    home.refresh_from_db()
    assert response.status_code == 200
    assert home.core == ""
    assert "at most 1,000 characters" in response.content.decode()
    assert too_long.strip() in response.content.decode()


def test_someone_who_may_only_teach_may_not_change_the_core(client, home, alice):
    client.force_login(alice)

    response = client.post("/knowledge/core", {"text": CORE})

    home.refresh_from_db()
    assert response.status_code == 403
    assert home.core == ""


def test_the_admin_edits_the_core(client, admin_user, home):
    client.force_login(admin_user)

    page = client.get(f"/admin/knowledge/memory/{home.pk}/change/").content.decode()

    assert 'name="core"' in page


def test_the_admin_lists_episodes_and_procedures_read_only(client, admin_user, home):
    episode = actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok").episode
    actions.record_procedure(memory=home, task="Deploy", steps=["push"], outcome="ok")
    client.force_login(admin_user)

    listed = client.get("/admin/knowledge/episode/").content.decode()
    procedures = client.get("/admin/knowledge/procedure/").content.decode()
    change = client.post(f"/admin/knowledge/episode/{episode.pk}/change/", {"text": "Changed."})

    assert "Deploys take 20 minutes." in listed
    assert "Deploy" in procedures
    assert change.status_code == 403
    episode.refresh_from_db()
    assert episode.text == "Deploys take 20 minutes."
