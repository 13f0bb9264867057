"""Model calls routed to a worker, at the server: the gateway writes a waiting call and waits
for its answer while a test thread plays the worker over HTTP (the test client, on a
connection of its own). Each failure case of the issue, with its outcome."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pydantic
import pytest
from django.db import connection
from django.test import Client

from brain import llm, workers
from brain.llm import routing
from brain.models import ModelCall, ModelRoute, WaitingCall, Worker

pytestmark = pytest.mark.django_db(transaction=True)


class Verdict(pydantic.BaseModel):
    verdict: str


@pytest.fixture
def key(home):
    return workers.create_token(memory=home, name="laptop").key


@pytest.fixture
def to_worker(home):
    workers.set_route(memory=home, task="reflect", provider="worker", model="llama3.2")
    return home


class PlaysWorker(threading.Thread):
    """A worker over plain HTTP: asks for calls and answers each with ``reply(call)`` — a dict
    (the answer's body without the lease), or None to hold the call and never answer."""

    def __init__(
        self,
        key: str,
        reply: Callable[[dict], dict | None],
        *,
        name: str = "laptop",
        calls: int = 1,
        wait: float = 5,
        delay: float = 0.0,
        models: tuple[str, ...] = ("llama3.2",),
    ):
        super().__init__(daemon=True)
        self.key, self.reply, self.worker_name = key, reply, name
        self.calls, self.wait, self.delay = calls, wait, delay
        self.models = list(models)
        self.taken: list[dict] = []
        self.answers: list[tuple[int, dict]] = []

    def post(self, path: str, body: dict):
        return Client().post(
            path,
            body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {self.key}"},
        )

    def run(self) -> None:
        try:
            while len(self.taken) < self.calls:
                response = self.post(
                    "/api/worker/calls/next",
                    {"worker": self.worker_name, "models": self.models, "wait": self.wait},
                )
                if response.status_code == 204:
                    return
                call = response.json()
                self.taken.append(call)
                body = self.reply(call)
                if body is None:
                    continue
                time.sleep(self.delay)
                answered = self.post(
                    f"/api/worker/calls/{call['id']}/answer", {"lease": call["lease"], **body}
                )
                content = answered.json() if answered.content else {}
                self.answers.append((answered.status_code, content))
        finally:
            connection.close()


def _ask(timeout: float = 5.0, output=Verdict, memory=None, **overrides):
    arguments = {
        "task": "reflect",
        "system": "Judge it.",
        "prompt": "Is the loft warm?",
        "max_tokens": 100,
        "timeout": timeout,
        "output": output,
        "memory": memory,
    }
    return llm.complete(**(arguments | overrides))


# Routes ----------------------------------------------------------------------------------------


def test_each_task_takes_its_own_route_then_the_memorys_default_then_brains(home, settings):
    settings.ANTHROPIC_API_KEY = ""
    assert llm.configured(home, "reflect") is False  # no route, no key: offline as before

    workers.set_route(memory=home, task="*", provider="worker")
    workers.set_route(memory=home, task="ask", provider="offline")
    settings.ANTHROPIC_API_KEY = "a-key"
    workers.set_route(memory=home, task="study", provider="anthropic")

    assert routing.route_for(home, "reflect") == routing.Route("worker", "", "*")
    assert llm.configured(home, "reflect") is True
    assert llm.configured(home, "ask") is False
    assert llm.configured(home, "study") is True
    assert llm.configured(None, "ask") is True  # no memory: brain's default, the key
    settings.ANTHROPIC_API_KEY = ""
    assert llm.configured(home, "study") is False
    assert llm.configured(home, "reflect") is True


def test_an_offline_route_refuses_the_call_without_recording_one(home):
    workers.set_route(memory=home, task="reflect", provider="offline")

    with pytest.raises(llm.LLMError, match="off in this memory"):
        _ask(memory=home)
    assert ModelCall.objects.count() == 0


def test_a_route_set_back_to_none_follows_the_default_again(home):
    workers.set_route(memory=home, task="reflect", provider="worker", model="llama3.2")
    result = workers.set_route(memory=home, task="reflect", provider="")

    assert "default again" in result.message
    assert not ModelRoute.objects.exists()


def test_a_route_to_nowhere_known_is_refused(home):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        workers.set_route(memory=home, task="reflect", provider="openai")


# Served by a worker ----------------------------------------------------------------------------


def test_a_call_routed_to_a_worker_is_answered_by_it_and_recorded_once(to_worker, key):
    worker = PlaysWorker(
        key,
        lambda call: {"text": '{"verdict": "same"}', "input_tokens": 30, "output_tokens": 4},
    )
    worker.start()

    answer = _ask(memory=to_worker)
    worker.join(5)

    assert answer.parsed == Verdict(verdict="same")
    row = ModelCall.objects.get()
    assert (row.provider, row.model, row.state, row.task) == ("worker", "llama3.2", "ok", "reflect")
    assert (row.input_tokens, row.output_tokens) == (30, 4)
    call = WaitingCall.objects.get()
    assert call.model_call == row and call.state == "answered"
    taken = worker.taken[0]
    assert taken["prompt"] == "Is the loft warm?" and taken["system"].startswith("Judge it.")
    assert taken["schema"]["properties"] == {"verdict": {"title": "Verdict", "type": "string"}}
    assert Worker.objects.get().served == 1


def test_while_it_waits_the_job_is_told_it_waits_for_a_worker_then_that_one_answers(to_worker, key):
    notes: list[str] = []
    worker = PlaysWorker(key, lambda call: {"text": '{"verdict": "novel"}'}, delay=0.5)
    worker.start()

    with llm.reporting(notes.append):
        _ask(memory=to_worker)
    worker.join(5)

    assert notes == [
        "Waiting for a worker to take the call (model llama3.2)",
        "A worker is answering",
    ]


# Failure cases ---------------------------------------------------------------------------------


def test_no_worker_the_call_fails_at_its_deadline_saying_it_waited_for_a_worker(to_worker, key):
    started = time.monotonic()

    with pytest.raises(llm.LLMTimeout) as raised:
        _ask(timeout=1.0, memory=to_worker)

    assert 0.9 < time.monotonic() - started < 2.5
    assert str(raised.value) == (
        "No worker answered in time: waiting for a worker for 1 s (task reflect, model "
        "llama3.2); no worker took the call."
    )
    assert ModelCall.objects.get().state == "timeout"
    call = WaitingCall.objects.get()
    assert call.state == "expired" and call.model_call is not None


def test_a_slow_answer_past_the_deadline_is_refused_and_the_job_has_already_failed(to_worker, key):
    worker = PlaysWorker(key, lambda call: {"text": '{"verdict": "same"}'}, delay=1.6)
    worker.start()

    with pytest.raises(llm.LLMTimeout, match="a worker took the call but did not answer"):
        _ask(timeout=1.0, memory=to_worker)
    worker.join(5)

    status, body = worker.answers[0]
    assert status == 409 and "past its deadline" in body["detail"]
    assert WaitingCall.objects.get().state == "expired"
    assert WaitingCall.objects.get().text == ""


def test_a_worker_that_dies_holding_a_call_loses_it_to_another_when_its_lease_runs_out(
    to_worker, key, settings
):
    settings.BRAIN_WORKER_LEASE_S = 1
    lives = PlaysWorker(key, lambda call: {"text": '{"verdict": "same"}'}, name="lives")

    def take_and_die(call):  # holds the call, never answers; only then does the other ask
        lives.start()

    dies = PlaysWorker(key, take_and_die, name="dies")
    dies.start()

    answer = _ask(timeout=6.0, memory=to_worker)
    dies.join(5)
    lives.join(5)

    assert answer.parsed == Verdict(verdict="same")
    call = WaitingCall.objects.get()
    assert (call.worker_name, call.attempts, call.state) == ("lives", 2, "answered")


def test_a_first_answer_of_the_wrong_shape_is_asked_again_and_the_second_used(to_worker, key):
    replies = iter(['{"verdict": 7}', '{"verdict": "same"}'])
    worker = PlaysWorker(key, lambda call: {"text": next(replies)}, calls=2)
    worker.start()

    answer = _ask(memory=to_worker)
    worker.join(5)

    assert answer.parsed == Verdict(verdict="same")
    assert [status for status, _ in worker.answers] == [422, 200]
    assert worker.taken[0]["lease"] != worker.taken[1]["lease"]
    assert ModelCall.objects.get().state == "ok"


def test_garbage_twice_fails_the_call_with_the_reason(to_worker, key):
    worker = PlaysWorker(key, lambda call: {"text": "I think it is warm."}, calls=2)
    worker.start()

    with pytest.raises(llm.LLMInvalidOutput) as raised:
        _ask(memory=to_worker)
    worker.join(5)

    assert "refused twice" in str(raised.value) and "not JSON" in str(raised.value)
    assert [body["failed"] for _, body in worker.answers] == [False, True]
    assert ModelCall.objects.get().state == "invalid"


def test_a_worker_whose_model_fails_twice_fails_the_call_naming_it(to_worker, key):
    worker = PlaysWorker(key, lambda call: {"error": "model 'llama3.2' not found"}, calls=2)
    worker.start()

    with pytest.raises(llm.LLMError, match=r"The worker's model failed: model 'llama3\.2'"):
        _ask(memory=to_worker)
    worker.join(5)


def test_a_token_revoked_mid_call_has_its_answer_refused_and_the_job_waits_on(to_worker, key, home):
    def revoke_then_answer(call):
        workers.revoke_token(workers.token_for_key(key))
        return {"text": '{"verdict": "same"}'}

    worker = PlaysWorker(key, revoke_then_answer)
    worker.start()

    with pytest.raises(llm.LLMTimeout):
        _ask(timeout=1.5, memory=to_worker)
    worker.join(5)

    status, body = worker.answers[0]
    assert status == 403 and body == {"detail": "This worker token was revoked."}


def test_two_workers_asking_at_once_for_one_call_exactly_one_gets_it(home, key):
    call = WaitingCall.objects.create(
        memory=home,
        task="reflect",
        prompt="?",
        deadline=WaitingCall._meta.get_field("deadline").to_python("2100-01-01T00:00:00Z"),
    )
    got: list[int | None] = []
    barrier = threading.Barrier(4)

    def ask(name: str) -> None:
        try:
            barrier.wait()
            taken = workers.take_next(
                workers.token_for_key(key), worker_name=name, models=[], wait=0.5
            )
            got.append(taken.pk if taken else None)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)

    assert sorted(got, key=lambda pk: pk or 0) == [None, None, None, call.pk]
    assert WaitingCall.objects.get().attempts == 1


def test_an_interrupted_job_leaves_no_call_for_a_worker_to_take(to_worker, key, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(workers, "wait_for", interrupted)

    with pytest.raises(KeyboardInterrupt):
        _ask(memory=to_worker)

    assert WaitingCall.objects.get().state == "expired"
    assert json.loads(json.dumps(workers.as_sent(WaitingCall.objects.get())))["deadline_in"] >= 0


# Embeddings ------------------------------------------------------------------------------------


def test_vectors_come_from_a_worker_when_the_memory_routes_embed_to_one(home, key):
    workers.set_route(memory=home, task="embed", provider="worker", model="nomic-embed-text")
    worker = PlaysWorker(
        key,
        lambda call: {"vectors": [[0.5, 0.5, 0.0] for _ in call["texts"]]},
        models=("nomic-embed-text",),
    )
    worker.start()

    vectors = llm.embed(memory=home, texts=["the loft", "the hall"], timeout=5, dimensions=3)
    worker.join(5)

    assert vectors == [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]
    sent = worker.taken[0]
    assert (sent["kind"], sent["texts"], sent["schema"]) == (
        "embed",
        ["the loft", "the hall"],
        {"dimensions": 3},
    )
    row = ModelCall.objects.get()
    assert (row.task, row.provider, row.model, row.state) == (
        "embed",
        "worker",
        "nomic-embed-text",
        "ok",
    )
    assert row.output == "2 vectors of 3 numbers"


def test_vectors_of_the_wrong_length_are_asked_for_again_then_fail(home, key):
    workers.set_route(memory=home, task="embed", provider="worker")
    worker = PlaysWorker(key, lambda call: {"vectors": [[0.1, 0.2]]}, calls=2)
    worker.start()

    with pytest.raises(llm.LLMInvalidOutput, match="Every vector must have 3 numbers"):
        llm.embed(memory=home, texts=["the loft"], timeout=5, dimensions=3)
    worker.join(5)

    assert [status for status, _ in worker.answers] == [422, 422]
    assert ModelCall.objects.get().state == "invalid"


def test_embeddings_not_routed_to_a_worker_are_not_asked_of_one(home):
    with pytest.raises(llm.LLMError, match="computed here"):
        llm.embed(memory=home, texts=["the loft"], timeout=5)
    assert not WaitingCall.objects.exists()


# What is kept ----------------------------------------------------------------------------------


def test_a_settled_call_keeps_no_words_and_calls_a_day_past_their_deadline_are_forgotten(
    to_worker, key, monkeypatch
):
    from datetime import timedelta

    from django.utils import timezone

    monkeypatch.setattr(workers, "_forgotten_at", {})  # this process has not looked yet

    old = WaitingCall.objects.create(
        memory=to_worker,
        task="reflect",
        prompt="the whole memory",
        deadline=timezone.now() - timedelta(days=1, minutes=1),
    )
    worker = PlaysWorker(key, lambda call: {"text": '{"verdict": "same"}'})
    worker.start()

    _ask(memory=to_worker)
    worker.join(5)

    assert not WaitingCall.objects.filter(pk=old.pk).exists()
    call = WaitingCall.objects.get()
    assert (call.state, call.system, call.prompt, call.text) == ("answered", "", "", "")
    assert ModelCall.objects.get().output == '{"verdict": "same"}'
