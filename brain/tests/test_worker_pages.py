"""Workers as a person meets them: the routes and the worker page on the Knowledge tab, the
admin's tokens, and jobs whose model calls wait for a worker that never comes."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from brain import workers
from brain.models import ModelRoute, WaitingCall, WorkerToken
from knowledge.models import Membership, Permission
from memory import actions, consolidator, study
from memory.models import ConsolidationRun, DocumentRevision, InboxItem
from memory.taught import Statement

# The Knowledge tab -----------------------------------------------------------------------------


def test_an_administrator_routes_a_task_to_a_worker_from_the_settings_page_without_javascript(
    signed_in, home
):
    page = signed_in.get("/settings/").content.decode()
    assert 'id="model-routes"' in page and 'name="provider:reflect"' in page

    response = signed_in.post(
        "/knowledge/model-routes",
        {"memory": home.slug, "provider:reflect": "worker", "model:reflect": " llama3.2 "},
        follow=True,
    )

    assert response.redirect_chain[-1][0].endswith("/settings/#model-routes")
    said = [str(message) for message in response.context["messages"]]
    assert said == ["Model calls for “reflect” now go to a worker (model llama3.2)."]
    route = ModelRoute.objects.get()
    assert (route.task, route.provider, route.model) == ("reflect", "worker", "llama3.2")
    assert '<option value="worker" selected>' in response.content.decode()


def test_saving_the_routes_unchanged_changes_nothing_and_says_so(signed_in, home):
    response = signed_in.post("/knowledge/model-routes", {"memory": home.slug}, follow=True)

    assert [str(m) for m in response.context["messages"]] == ["No route changed."]
    assert not ModelRoute.objects.exists()


def test_the_routes_form_answers_htmx_with_its_region_and_a_toast(signed_in, home):
    response = signed_in.post(
        "/knowledge/model-routes",
        {"memory": home.slug, "provider:*": "offline"},
        headers={"HX-Request": "true"},
    )

    body = response.content.decode()
    assert body.lstrip().startswith('<section class="card" id="model-routes"')
    assert "follow the default" not in body
    assert "Model calls for every task now go to offline" in response["HX-Trigger"]


def test_a_curator_sees_the_routes_but_cannot_change_them(client, home, alice):
    workers.set_route(memory=home, task="ask", provider="worker", model="llama3.2")
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    client.force_login(alice)

    page = client.get("/settings/").content.decode()
    refused = client.post("/knowledge/model-routes", {"memory": home.slug, "provider:ask": ""})

    assert 'id="model-routes"' in page and 'name="provider:ask"' not in page
    assert "<code>ask</code>: a worker (llama3.2)" in page
    assert refused.status_code == 403
    assert ModelRoute.objects.filter(task="ask").exists()


def test_the_worker_page_shows_who_was_seen_what_they_served_and_the_calls_waiting(
    signed_in, home, client
):
    key = workers.create_token(memory=home, name="study laptop").key
    token = workers.token_for_key(key)
    workers.seen(token, "attic-pc", ["llama3.2"])
    served = WaitingCall.objects.create(
        memory=home, task="reflect", deadline=timezone.now() + timedelta(seconds=60)
    )
    taken = workers.take_next(token, worker_name="attic-pc", models=[], wait=0)
    assert taken is not None
    workers.answer(token, call_id=served.pk, lease=taken.lease, body={"text": "ok"})
    WaitingCall.objects.create(
        memory=home,
        task="consolidate",
        model="llama3.2",
        deadline=timezone.now() + timedelta(seconds=90),
    )

    region = signed_in.get("/knowledge/workers", headers={"HX-Request": "true"}).content.decode()

    assert 'data-worker="attic-pc"' in region and "study laptop" in region
    assert "<td>1</td>" in region  # served one
    assert "reflect," in region  # its last call
    assert "consolidate (llama3.2) — waiting, asked 0 s ago" in region
    assert 'hx-trigger="every 5s, memoryChanged from:body"' in region  # while calls wait
    assert key not in signed_in.get("/settings/").content.decode()


def test_the_worker_page_says_how_to_start_when_no_worker_was_ever_seen(signed_in, home):
    page = signed_in.get("/settings/").content.decode()

    assert "No worker has asked for calls yet." in page
    assert "brain worker-token create" in page


# The admin -------------------------------------------------------------------------------------


def test_the_admin_makes_a_token_showing_its_key_once_and_revokes_it(signed_in, home):
    response = signed_in.post(
        "/admin/brain/workertoken/add/", {"memory": home.pk, "name": "attic pc"}, follow=True
    )

    said = [str(message) for message in response.context["messages"]]
    key = next(word for text in said for word in text.split() if word.startswith("bw_"))
    token = WorkerToken.objects.get()
    assert workers.token_for_key(key) == token and token.created_by.username == "ada"
    change = signed_in.get(f"/admin/brain/workertoken/{token.pk}/change/").content.decode()
    assert key not in change and token.key_hash not in change

    signed_in.post(
        "/admin/brain/workertoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
        follow=True,
    )

    token.refresh_from_db()
    assert token.revoked_at is not None


def test_the_admin_sets_a_route_through_the_same_rule(signed_in, home):
    response = signed_in.post(
        "/admin/brain/modelroute/add/",
        {"memory": home.pk, "task": "ask", "provider": "offline", "model": "ignored"},
        follow=True,
    )

    assert response.status_code == 200
    route = ModelRoute.objects.get()
    assert (route.provider, route.model) == ("offline", "")  # offline has no model


# Jobs waiting for a worker that never comes ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_pass_with_no_worker_fails_at_its_deadline_saying_so_and_writes_nothing(home, settings):
    settings.BRAIN_CONSOLIDATION_DEADLINE_S = 2
    workers.set_route(memory=home, task="consolidate", provider="worker", model="llama3.2")
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin="typed", action="add")
    before = DocumentRevision.objects.current(home)

    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)

    run = ConsolidationRun.objects.get(pk=request.run.pk)
    assert run.state == "timed_out" and run.composer == "worker"
    assert run.reason.startswith("No worker answered in time: waiting for a worker for 2 s")
    assert run.reason.endswith("Nothing was written and the queue is unchanged.")
    after = DocumentRevision.objects.current(home)
    assert (after.pk, after.text.encode()) == (before.pk, before.text.encode())
    assert InboxItem.objects.pending().count() == 1
    assert WaitingCall.objects.get().state == "expired"


@pytest.mark.django_db(transaction=True)
def test_a_running_pass_shows_it_waits_for_a_worker_on_the_banner(signed_in, home):
    run = ConsolidationRun.objects.create(
        memory=home,
        trigger="cli",
        claimed_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    WaitingCall.objects.create(
        memory=home,
        task="consolidate",
        model="llama3.2",
        deadline=timezone.now() + timedelta(minutes=5),
    )

    banner = signed_in.get(f"/knowledge/runs/{run.pk}/banner").content.decode()

    assert "waiting for a worker with llama3.2 to take its model call" in banner


@pytest.mark.django_db(transaction=True)
def test_a_study_session_shows_it_waits_for_a_worker_while_it_does(home, settings, monkeypatch):
    from knowledge.models import Fact

    workers.set_route(memory=home, task="study", provider="worker", model="llama3.2")
    actions.learn(
        Statement.typed(memory=home, text="The boiler was serviced in March.", origin="typed")
    )
    steps: list[str] = []
    real_step = study._step

    def step(session, words):
        steps.append(words)
        real_step(session, words)

    monkeypatch.setattr(study, "_step", step)
    monkeypatch.setattr(study, "STUDY", dataclasses.replace(study.STUDY, timeout=1.0))
    started = study.start(memory=home, topic="boiler", send=False)

    session = study.execute(started.session.pk)

    assert "Waiting for a worker to take the call (model llama3.2)" in steps
    assert session is not None and session.state == "done"
    assert "waiting for a worker" in session.report  # the model part says why it was not used
    assert Fact.objects.count() == 1
