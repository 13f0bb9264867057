"""Jobs served end to end by a real `brain worker`: the memory's route sends a task to workers,
the job runs here as the Celery task would run it, a worker process takes its model call from
the live test server and asks a stub local model on loopback. What a household sees: the pass
files, the reflection learns, and with no worker the job fails at its deadline naming why,
having written nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from brain import llm, workers
from brain.models import ModelCall, WaitingCall, Worker
from brain.testing import wait_until
from brain.tests.stubs.local_model import LocalReply, local_json, local_text, vector_for
from brain.tests.test_worker_program import WorkerProcess
from knowledge.models import Fact, Memory, Subject
from memory import actions, consolidator, conversations, reflection, study
from memory.models import (
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    Origin,
    ReflectionRun,
    StudySession,
)
from memory.taught import Statement

FILED_DOCUMENT = "# Memory\n\n## Rooms\n\n- The loft is warm.\n"
WRITE = local_json(
    {
        "decision": "write",
        "reason": "Filed the loft.",
        "document": FILED_DOCUMENT,
        "voice": "The loft is warm.",
    }
)


@pytest.fixture
def memory(transactional_db) -> Memory:
    """The default memory, committed: the live server and the worker read it from elsewhere."""
    return Memory.objects.default()


@pytest.fixture(autouse=True)
def _no_task_leaves_this_test(monkeypatch):
    """Jobs here run in the test; what they would send to Celery (a reflection after a
    conversation is recorded, a pass asked for) must not reach the shared test broker."""
    from brain.celery import app

    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: None)


@pytest.fixture
def key(memory) -> str:
    return workers.create_token(memory=memory, name="attic machine").key


@pytest.fixture
def start_worker(live_server) -> Iterator[Any]:
    started: list[WorkerProcess] = []

    def start(stub, name: str, token: str) -> WorkerProcess:
        worker = WorkerProcess(
            "--server", live_server.url, "--token", token, "--model", "llama3.2",
            "--endpoint", stub.base_url, "--name", name, "--wait", "5",
        )  # fmt: skip
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


def to_worker(memory: Memory, task: str) -> None:
    workers.set_route(memory=memory, task=task, provider="worker", model="llama3.2")


def a_pass(memory: Memory) -> ConsolidationRun:
    """One consolidation pass, run here as the Celery task runs it."""
    request = consolidator.request_consolidation(memory=memory, trigger="manual", send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def test_a_consolidation_pass_is_served_end_to_end_by_a_worker_on_ollama(
    memory, key, ollama_stub, start_worker
):
    to_worker(memory, "consolidate")
    ollama_stub.script(WRITE)
    actions.add_to_inbox(memory=memory, text="The loft is warm.", origin=Origin.TYPED)
    worker = start_worker(ollama_stub, "attic", key)

    run = a_pass(memory)

    assert run.state == "filed", run.reason
    assert DocumentRevision.objects.current(memory).text == FILED_DOCUMENT
    assert not InboxItem.objects.pending().exists()
    recorded = ModelCall.objects.get(task="consolidate")
    assert (recorded.provider, recorded.model, recorded.state) == ("worker", "llama3.2", "ok")
    served = WaitingCall.objects.get()
    assert (served.model_call, served.worker_name, served.state) == (recorded, "attic", "answered")
    # The worker was given the composer's question and the item, and the shape of the answer;
    # the server forgot the call's words once the pass had its answer.
    [chat] = ollama_stub.chats
    system, prompt = (message["content"] for message in chat.body["messages"])
    assert system.startswith("You keep one small, human-readable markdown document")
    assert "The loft is warm." in prompt
    assert set(chat.body["format"]["properties"]) >= {"decision", "document", "voice"}
    assert (served.system, served.prompt, served.text) == ("", "", "")
    assert Worker.objects.get(name="attic").served == 1
    worker.wait_for_log(f"call {served.pk} consolidate chat:")


def test_a_reflection_is_served_end_to_end_by_a_worker_on_an_openai_compatible_server(
    memory, key, openai_stub, start_worker, django_user_model
):
    sarah = django_user_model.objects.create_user(username="sarah", first_name="Sarah")
    to_worker(memory, "reflect")
    openai_stub.script(
        local_json(
            {"facts": [{"turn": 0, "kind": "preference", "text": "Sarah likes the bedroom at 19."}]}
        )
    )
    source = conversations.record_conversation(
        memory=memory,
        channel="voice",
        person=sarah,
        messages=[
            {"speaker": "Sarah", "text": "I like the bedroom at 19"},
            {"speaker": "brain", "text": "Noted."},
        ],
    ).source
    start_worker(openai_stub, "attic", key)

    run = reflection.reflect(source)

    assert run.state == ReflectionRun.State.FILED, run.reason
    assert run.extractor == "model"
    assert Fact.objects.filter(text="Sarah likes the bedroom at 19.").exists()
    recorded = ModelCall.objects.get(task="reflect")
    assert (recorded.provider, recorded.model, recorded.state) == ("worker", "llama3.2", "ok")
    [chat] = openai_stub.chats
    assert "[0] Sarah (signed in): I like the bedroom at 19" in chat.body["messages"][1]["content"]
    assert chat.body["response_format"]["type"] == "json_schema"


def test_with_no_worker_the_pass_fails_at_its_deadline_naming_why_and_writes_nothing(
    memory, settings
):
    actions.add_to_inbox(memory=memory, text="The loft is warm.", origin=Origin.TYPED)
    first = a_pass(memory)  # no route yet: offline, filed by the rules
    assert first.state == "filed", first.reason
    before = DocumentRevision.objects.current(memory)
    to_worker(memory, "consolidate")
    settings.BRAIN_CONSOLIDATION_DEADLINE_S = 3
    item = actions.add_to_inbox(memory=memory, text="Guests use the loft.", origin=Origin.TYPED)

    run = a_pass(memory)

    assert run.state == "timed_out", run.reason
    assert "waiting for a worker" in run.reason
    assert "no worker took the call" in run.reason
    after = DocumentRevision.objects.current(memory)
    assert (after.pk, after.text.encode()) == (before.pk, before.text.encode())
    assert InboxItem.objects.get(pk=item.pk).state == "pending"
    assert WaitingCall.objects.get().state == "expired"  # no late answer can be used
    assert ModelCall.objects.get(task="consolidate").state == "timeout"


def test_a_worker_answering_garbage_twice_fails_the_reflection_which_reports_it(
    memory, key, ollama_stub, start_worker, django_user_model
):
    sarah = django_user_model.objects.create_user(username="sarah", first_name="Sarah")
    to_worker(memory, "reflect")
    ollama_stub.script(local_text("Sarah likes it warm, I think."), local_json({"facts": "none"}))
    source = conversations.record_conversation(
        memory=memory,
        channel="voice",
        person=sarah,
        messages=[{"speaker": "Sarah", "text": "I like the bedroom at 19"}],
    ).source
    worker = start_worker(ollama_stub, "attic", key)

    run = reflection.reflect(source)

    assert run.state == ReflectionRun.State.FAILED
    assert "The worker's answer was refused twice" in run.reason
    assert "facts" in run.reason  # the second answer's fault: facts is not a list
    assert not Fact.objects.exists()
    call = WaitingCall.objects.get()
    assert (call.state, call.attempts, call.bad_answers) == ("failed", 2, 2)
    assert len(ollama_stub.chats) == 2
    worker.wait_for_log("refused by the server (HTTP 422")
    assert worker.process.poll() is None


def test_a_pass_is_finished_by_a_second_worker_when_the_first_is_killed_holding_its_call(
    memory, key, ollama_stub, openai_stub, start_worker, settings
):
    settings.BRAIN_WORKER_LEASE_S = 2
    to_worker(memory, "consolidate")
    ollama_stub.script(local_json({"decision": "keep", "reason": "never sent"}, hang_s=60))
    openai_stub.script(WRITE)
    actions.add_to_inbox(memory=memory, text="The loft is warm.", origin=Origin.TYPED)
    first = start_worker(ollama_stub, "first", key)

    def kill_first_then_start_second() -> None:
        wait_until(lambda: ollama_stub.chats, timeout=30, message="the first worker never asked")
        first.process.kill()
        start_worker(openai_stub, "second", key)

    helper = threading.Thread(target=kill_first_then_start_second)
    helper.start()
    run = a_pass(memory)
    helper.join(timeout=30)

    assert run.state == "filed", run.reason
    assert DocumentRevision.objects.current(memory).text == FILED_DOCUMENT
    call = WaitingCall.objects.get()
    assert (call.worker_name, call.attempts, call.state) == ("second", 2, "answered")
    assert len(ollama_stub.chats) == len(openai_stub.chats) == 1


def test_texts_are_embedded_by_a_worker_when_the_memory_routes_embed_to_one(
    memory, key, openai_stub, start_worker
):
    to_worker(memory, "embed")
    texts = ["The loft is warm.", "Guests use the loft."]
    start_worker(openai_stub, "attic", key)

    vectors = llm.embed(memory=memory, texts=texts, timeout=30, dimensions=384)

    assert vectors == [vector_for(text) for text in texts]
    assert openai_stub.embeds[0].body == {"model": "llama3.2", "input": texts}
    recorded = ModelCall.objects.get(task="embed")
    assert (recorded.provider, recorded.state) == ("worker", "ok")


def test_vectors_of_the_wrong_length_are_refused_twice_and_the_embedding_fails_saying_so(
    memory, key, ollama_stub, start_worker
):
    to_worker(memory, "embed")
    ollama_stub.script_embed(LocalReply(vectors=[[0.5, 0.5]]))
    start_worker(ollama_stub, "attic", key)

    with pytest.raises(llm.LLMInvalidOutput) as refused:
        llm.embed(memory=memory, texts=["The loft is warm."], timeout=30, dimensions=384)

    assert "Every vector must have 384 numbers." in str(refused.value)
    assert len(ollama_stub.embeds) == 2


def test_a_study_says_it_waits_for_a_worker_until_one_starts_then_files_what_it_concluded(
    memory, key, ollama_stub, start_worker
):
    heat_pump = Subject.objects.create(
        memory=memory, kind="device", name="Heat pump", entity_id="climate.heat_pump"
    )
    fact = actions.learn(
        Statement.typed(
            memory=memory,
            text="The heat pump runs on weather compensation",
            origin="typed",
            subjects=[heat_pump],
        )
    ).fact
    to_worker(memory, "study")
    concluded = "The heat pump is a low-temperature system"
    ollama_stub.script(
        local_json({"conclusions": [{"statement": concluded, "because": [fact.pk]}]}, hang_s=1.5)
    )
    session = study.start(memory=memory, topic="Heat pump", send=False).session

    def run_the_task() -> None:
        study.execute(session.pk)
        connection.close()

    def step() -> str:
        return StudySession.objects.get(pk=session.pk).step

    job = threading.Thread(target=run_the_task)
    job.start()
    wait_until(lambda: step().startswith("Waiting for a worker to take the call"), timeout=30)
    assert "(model llama3.2)" in step()
    start_worker(ollama_stub, "attic", key)
    wait_until(lambda: step() == "A worker is answering", timeout=30)
    job.join(timeout=60)

    session.refresh_from_db()
    assert session.state == StudySession.State.DONE, session.report
    assert session.filed == 1
    assert InboxItem.objects.filter(text=concluded).exists()
