"""The worker protocol at the server (docs/API.md, Workers): a test plays the worker with plain
HTTP through the test client, against calls written as the gateway writes them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain import workers
from brain.models import WaitingCall, Worker, WorkerToken


@pytest.fixture
def key(home):
    return workers.create_token(memory=home, name="study laptop").key


def _call(memory, **fields) -> WaitingCall:
    values = {
        "task": "reflect",
        "model": "llama3.2",
        "system": "Find what is worth remembering.",
        "prompt": "Conversation: [1] Sarah: I like the bedroom at 19 degrees.",
        "max_tokens": 800,
        "deadline": timezone.now() + timedelta(seconds=60),
    } | fields
    return WaitingCall.objects.create(memory=memory, **values)


def _post(client, path: str, key: str | None, body: dict):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post(path, body, content_type="application/json", headers=headers)


def _next(client, key, **body):
    return _post(client, "/api/worker/calls/next", key, {"worker": "laptop", "wait": 0} | body)


def test_a_token_is_made_with_its_key_shown_once_and_only_its_hash_kept(home):
    made = workers.create_token(memory=home, name="  study   laptop ")

    assert made.key.startswith("bw_") and len(made.key) > 40
    assert made.key in made.message
    stored = WorkerToken.objects.get()
    assert stored.name == "study laptop"
    assert made.key not in {stored.key_hash, stored.prefix}
    assert made.key.startswith(stored.prefix)
    assert workers.token_for_key(made.key) == stored


def test_a_worker_takes_the_waiting_call_with_only_what_it_carries(client, home, key):
    call = _call(home, schema={"type": "object"})

    response = _next(client, key, models=["llama3.2"])

    assert response.status_code == 200
    sent = response.json()
    assert set(sent) == {
        "id",
        "lease",
        "lease_expires_in",
        "kind",
        "task",
        "model",
        "system",
        "prompt",
        "max_tokens",
        "schema",
        "deadline_in",
    }
    assert sent["id"] == call.pk and sent["kind"] == "chat" and sent["task"] == "reflect"
    assert sent["prompt"] == call.prompt and sent["schema"] == {"type": "object"}
    assert 55 < sent["deadline_in"] <= 60
    call.refresh_from_db()
    assert call.state == "leased" and call.lease == sent["lease"] and call.attempts == 1
    assert call.worker_name == "laptop"
    seen = Worker.objects.get()
    assert (seen.name, seen.models_served) == ("laptop", ["llama3.2"])


def test_nothing_waiting_is_a_204_after_the_wait(client, home, key):
    response = _next(client, key, wait=0.3)

    assert response.status_code == 204


def test_a_call_for_another_model_or_another_memory_is_not_handed_out(client, home, key):
    from knowledge.models import Memory

    _call(home, model="mistral")
    _call(Memory.objects.create(slug="office", name="Office"), model="llama3.2")

    assert _next(client, key, models=["llama3.2"]).status_code == 204


def test_a_call_past_its_deadline_is_never_handed_out(client, home, key):
    _call(home, deadline=timezone.now() - timedelta(seconds=1))

    assert _next(client, key).status_code == 204


def test_an_answer_on_the_lease_is_taken_and_counted_for_the_worker(client, home, key):
    call = _call(home)
    lease = _next(client, key).json()["lease"]

    response = _post(
        client,
        f"/api/worker/calls/{call.pk}/answer",
        key,
        {"lease": lease, "text": "Sarah likes 19 degrees.", "input_tokens": 50, "output_tokens": 7},
    )

    assert response.status_code == 200 and response.json() == {"accepted": True}
    call.refresh_from_db()
    assert call.state == "answered" and call.text == "Sarah likes 19 degrees."
    assert (call.input_tokens, call.output_tokens) == (50, 7)
    assert Worker.objects.get().served == 1


def test_a_second_answer_or_one_on_a_wrong_lease_is_a_conflict(client, home, key):
    call = _call(home)
    lease = _next(client, key).json()["lease"]
    path = f"/api/worker/calls/{call.pk}/answer"

    wrong = _post(client, path, key, {"lease": "not-it", "text": "x"})
    first = _post(client, path, key, {"lease": lease, "text": "first"})
    again = _post(client, path, key, {"lease": lease, "text": "second"})

    assert wrong.status_code == 409 and "no longer current" in wrong.json()["detail"]
    assert first.status_code == 200
    assert again.status_code == 409 and again.json()["detail"] == "This call was already answered."
    call.refresh_from_db()
    assert call.text == "first"


def test_a_heartbeat_renews_the_lease_until_the_call_is_settled(client, home, key, settings):
    settings.BRAIN_WORKER_LEASE_S = 30
    call = _call(home)
    lease = _next(client, key).json()["lease"]
    WaitingCall.objects.filter(pk=call.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=2)
    )
    path = f"/api/worker/calls/{call.pk}/heartbeat"

    beat = _post(client, path, key, {"lease": lease})

    assert beat.status_code == 200 and beat.json() == {"lease_expires_in": 30.0}
    call.refresh_from_db()
    assert call.lease_expires_at > timezone.now() + timedelta(seconds=25)
    _post(client, f"/api/worker/calls/{call.pk}/answer", key, {"lease": lease, "text": "done"})
    assert _post(client, path, key, {"lease": lease}).status_code == 409


def test_a_lease_run_out_is_handed_out_again_and_the_old_lease_refused(client, home, key):
    call = _call(home)
    first = _next(client, key, worker="dies").json()["lease"]
    WaitingCall.objects.filter(pk=call.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    second = _next(client, key, worker="lives").json()
    late = _post(client, f"/api/worker/calls/{call.pk}/answer", key, {"lease": first, "text": "x"})

    assert second["id"] == call.pk and second["lease"] != first
    assert late.status_code == 409
    call.refresh_from_db()
    assert (call.worker_name, call.attempts, call.state) == ("lives", 2, "leased")


def test_an_answer_of_the_wrong_shape_is_handed_out_again_once_then_fails(client, home, key):
    call = _call(home, output_class="brain.tests.test_worker_protocol.Shape", schema={})
    path = f"/api/worker/calls/{call.pk}/answer"

    lease = _next(client, key).json()["lease"]
    first = _post(client, path, key, {"lease": lease, "text": "Sure! Here you go."})
    call.refresh_from_db()
    assert first.status_code == 422 and "not JSON" in first.json()["detail"]
    assert first.json()["failed"] is False
    assert call.state == "waiting" and call.lease == ""

    again = _next(client, key).json()
    second = _post(client, path, key, {"lease": again["lease"], "text": '{"facts": 3}'})

    assert again["lease"] != lease
    assert second.status_code == 422 and second.json()["failed"] is True
    assert "facts" in second.json()["detail"]
    call.refresh_from_db()
    assert call.state == "failed" and "does not match Shape: facts" in call.error
    assert Worker.objects.get().refused == 2


def test_a_worker_whose_model_failed_says_so_and_the_call_goes_back_once(client, home, key):
    call = _call(home)
    path = f"/api/worker/calls/{call.pk}/answer"

    for _ in range(2):
        lease = _next(client, key).json()["lease"]
        response = _post(client, path, key, {"lease": lease, "error": "connection refused"})
        assert response.status_code == 200

    call.refresh_from_db()
    assert call.state == "failed"
    assert call.error == "The worker's model failed: connection refused"


def test_an_embed_call_takes_one_vector_per_text(client, home, key):
    call = _call(home, kind="embed", texts=["a", "b"], system="", prompt="", max_tokens=0)
    sent = _next(client, key).json()
    path = f"/api/worker/calls/{call.pk}/answer"

    short = _post(client, path, key, {"lease": sent["lease"], "vectors": [[0.1, 0.2]]})
    lease = _next(client, key).json()["lease"]
    good = _post(client, path, key, {"lease": lease, "vectors": [[0.1, 0.2], [0.3, 0.4]]})

    assert sent["texts"] == ["a", "b"]
    assert short.status_code == 422 and "2 vectors" in short.json()["detail"]
    assert good.status_code == 200
    call.refresh_from_db()
    assert call.vectors == [[0.1, 0.2], [0.3, 0.4]]


@pytest.mark.parametrize("header", [None, "Bearer bw_not-a-real-key", "Bearer nonsense"])
def test_no_token_or_a_wrong_one_is_a_401(client, home, header):
    headers = {"Authorization": header} if header else {}

    response = client.post(
        "/api/worker/calls/next", {"wait": 0}, content_type="application/json", headers=headers
    )

    assert response.status_code == 401


def test_a_person_signed_in_is_not_a_worker(client, home, admin_user):
    client.force_login(admin_user)

    assert _next(client, None).status_code in (401, 403)


def test_a_revoked_token_is_refused_and_its_answer_mid_call_too(client, home, key):
    call = _call(home)
    lease = _next(client, key).json()["lease"]

    workers.revoke_token(WorkerToken.objects.get())
    answer = _post(
        client, f"/api/worker/calls/{call.pk}/answer", key, {"lease": lease, "text": "x"}
    )

    assert answer.status_code == 403
    assert answer.json() == {"detail": "This worker token was revoked."}
    assert _next(client, key).status_code == 403
    call.refresh_from_db()
    assert (call.state, call.lease, call.text) == ("waiting", "", "")  # for another worker
    other = workers.create_token(memory=home, name="attic pc").key
    assert _next(client, other).json()["id"] == call.pk


@pytest.mark.parametrize(
    "body",
    [{"wait": 30}, {"wait": "soon"}, {"models": "llama3.2"}, {"worker": 7}],
)
def test_a_bad_request_for_a_call_names_what_is_wrong(client, home, key, body):
    response = _next(client, key, **body)

    assert response.status_code == 400


import pydantic  # noqa: E402  (the shape a test call asks for, by its dotted path)


class Shape(pydantic.BaseModel):
    facts: list[str]


def test_a_worker_polling_again_within_seconds_is_not_written_again_unless_its_models_change(
    client, home, key
):
    _next(client, key, models=["llama3.2"])
    first = Worker.objects.get().last_seen_at

    _next(client, key, models=["llama3.2"])
    assert Worker.objects.get().last_seen_at == first

    _next(client, key, models=["llama3.2", "mistral"])
    again = Worker.objects.get()
    assert again.last_seen_at > first and again.models_served == ["llama3.2", "mistral"]
