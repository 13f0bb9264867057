"""Agent memory over HTTP: /api/episodes/, /api/procedures/ and /api/agent/…, the same actions
the MCP tools and the terminal call, with a token as its person."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from agent import actions
from knowledge.models import Episode, Fact, Membership, Permission, Procedure


@pytest.fixture
def token(alice) -> str:
    return Token.objects.create(user=alice).key


def _post(client, token: str, path: str, data: dict | None = None):
    return client.post(
        path,
        data or {},
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )


def _get(client, token: str, path: str):
    return client.get(path, headers={"Authorization": f"Token {token}"})


def test_an_episode_is_recorded_over_http_and_waits(client, home, token):
    response = _post(
        client, token, "/api/episodes/", {"text": "Deploys take 20 minutes.", "outcome": "ok"}
    )

    assert response.status_code == 201
    body = response.json()
    episode = Episode.objects.get()
    assert body["episode"]["id"] == episode.pk
    assert body["episode"]["outcome"] == "ok"
    assert body["episode"]["recorded_by"] == "alice"
    assert body["message"].startswith(f"Recorded episode #{episode.pk} (ok)")
    waiting = _get(client, token, "/api/episodes/?pending=1").json()
    assert [e["id"] for e in waiting["episodes"]] == [episode.pk]


def test_an_outcome_of_failure_is_a_400_that_names_the_vocabulary(client, home, token):
    response = _post(
        client, token, "/api/episodes/", {"text": "The deploy hung.", "outcome": "failure"}
    )

    assert response.status_code == 400
    assert "ok, fail or unknown" in str(response.json())
    assert not Episode.objects.exists()


def test_a_duplicate_episode_over_http_says_so(client, home, token):
    _post(client, token, "/api/episodes/", {"text": "Deploys take 20 minutes.", "outcome": "ok"})

    again = _post(
        client, token, "/api/episodes/", {"text": "Deploys take twenty minutes.", "outcome": "ok"}
    ).json()

    first = Episode.objects.order_by("pk").first()
    assert again["episode"]["restates"] == first.pk
    assert f"episode #{first.pk}" in again["message"]


def test_the_agent_distils_over_http_and_unknown_ids_are_refused(client, home, token):
    episode = actions.encode(memory=home, text="deploy hung, VPN down", outcome="fail").episode

    refused = _post(
        client,
        token,
        "/api/episodes/distil",
        {"episode_ids": [episode.pk, 424242], "propositions": ["Avoid: deploying without VPN."]},
    )
    done = _post(
        client,
        token,
        "/api/episodes/distil",
        {"episode_ids": [episode.pk], "propositions": ["Avoid: deploying without the VPN."]},
    )

    assert refused.status_code == 400
    assert refused.json()["detail"] == "No waiting episode #424242 in Home: nothing was distilled."
    assert done.status_code == 200
    assert done.json()["message"] == "Distilled 1 episode into 1 new belief."
    assert Fact.objects.get().valence == "failure"
    assert done.json()["fact_ids"] == [Fact.objects.get().pk]
    assert (done.json()["dropped"], done.json()["waiting"]) == ([], 0)


def test_the_sleep_pass_runs_now_when_asked_to_wait(client, home, token):
    actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")

    response = _post(client, token, "/api/agent/sleep", {"wait": True})

    assert response.status_code == 200
    assert response.json()["message"].startswith("Distilled 1 episode into 1 new belief.")
    assert Fact.objects.get().text == "Deploys take 20 minutes."
    body = response.json()
    assert (body["fact_ids"], body["dropped"], body["waiting"]) == ([Fact.objects.get().pk], [], 0)


def test_the_sleep_pass_asked_to_wait_with_learning_off_says_so_and_changes_nothing(
    client, home, token
):
    actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")
    home.learning = False
    home.save(update_fields=["learning"])

    response = _post(client, token, "/api/agent/sleep", {"wait": True})

    assert response.status_code == 200
    assert (response.json()["decayed"], response.json()["pruned"]) == ([], [])
    assert "learning" in response.json()["message"].lower()
    assert not Fact.objects.exists()


def test_the_sleep_pass_is_queued_when_the_caller_does_not_wait(
    client, home, token, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("agent.tasks.sleep.delay", lambda memory_id: sent.append(memory_id))

    with django_capture_on_commit_callbacks(execute=True):
        response = _post(client, token, "/api/agent/sleep")

    assert response.status_code == 202
    assert sent == [home.pk]
    assert response.json()["message"] == "The sleep pass runs in the background."


def test_decay_and_prune_have_their_own_addresses(client, home, token):
    decayed = _post(client, token, "/api/agent/decay")
    pruned = _post(client, token, "/api/agent/prune", {"keep": 5})
    bad = _post(client, token, "/api/agent/prune", {"keep": 0})

    assert decayed.json()["message"] == "Nothing has gone stale."
    assert pruned.json()["retired"] == []
    assert bad.status_code == 400


def test_procedures_are_recorded_listed_and_scored_over_http(client, home, token):
    recorded = _post(
        client,
        token,
        "/api/procedures/",
        {"task": "Deploy the web app", "steps": ["build", "migrate", "restart"], "outcome": "ok"},
    )
    procedure = Procedure.objects.get()
    scored = _post(client, token, f"/api/procedures/{procedure.pk}/outcome", {"outcome": "fail"})
    listed = _get(client, token, "/api/procedures/").json()

    assert recorded.status_code == 201
    assert recorded.json()["procedure"]["ref"] == f"p{procedure.pk}"
    assert scored.json()["procedure"]["failures"] == 1
    assert listed["procedures"][0]["steps"] == ["build", "migrate", "restart"]
    assert listed["procedures"][0]["confidence"] == pytest.approx(0.5)


def test_a_procedure_without_steps_is_a_400(client, home, token):
    response = _post(
        client, token, "/api/procedures/", {"task": "Deploy", "steps": [], "outcome": "ok"}
    )

    assert response.status_code == 400
    assert not Procedure.objects.exists()


def test_stats_retrieve_and_outcome_by_reference(client, home, token):
    actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")
    actions.sleep(memory=home)
    fact = Fact.objects.get()

    stats = _get(client, token, "/api/agent/stats").json()
    found = _post(client, token, "/api/agent/retrieve", {"query": "deploy", "k": 3}).json()
    scored = _post(client, token, "/api/agent/outcome", {"ref": str(fact.pk), "outcome": "ok"})

    assert (stats["beliefs"], stats["episodes"], stats["pending"]) == (1, 1, 0)
    assert found["facts"][0]["id"] == fact.pk
    assert scored.json()["successes"] == 1


def test_the_core_is_read_by_readers_and_changed_by_curators_only(client, home, alice, token):
    teacher = _post(client, token, "/api/agent/core", {"text": "You work for Priya."})
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    curator = client.put(
        "/api/agent/core",
        {"text": "You work for Priya."},
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )

    assert teacher.status_code in (403, 405)
    assert curator.status_code == 200
    assert _get(client, token, "/api/agent/core").json()["text"] == "You work for Priya."


def test_a_reader_may_not_record_episodes_or_procedures(client, home, alice, token):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)

    episode = _post(client, token, "/api/episodes/", {"text": "Deploys are slow.", "outcome": "ok"})
    procedure = _post(
        client, token, "/api/procedures/", {"task": "Deploy", "steps": ["push"], "outcome": "ok"}
    )
    sleep = _post(client, token, "/api/agent/sleep", {"wait": True})

    assert (episode.status_code, procedure.status_code, sleep.status_code) == (403, 403, 403)
    assert not Episode.objects.exists() and not Procedure.objects.exists()
    assert _get(client, token, "/api/agent/stats").status_code == 200
