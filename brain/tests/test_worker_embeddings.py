"""A memory's own vectors from its worker: a memory that routes its task "embed" to a worker has
its facts and questions embedded by the worker's model, end to end — a real `brain worker`
process against the live test server and a stub local model (Ollama's API) on loopback.

What a household sees: a fact taught is stored with the worker's vector, recall asks the worker
for the question's and finds by meaning; with no worker online teaching still keeps the fact
(no vector yet) and recall still answers by words, each within its short deadline, and once a
worker is back the background re-embedding gives the fact its vector; switching the route
makes the memory's vectors stale, and only that memory's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from django.urls import reverse

from brain import workers
from brain.models import ModelCall, WaitingCall, Worker
from brain.testing import wait_until
from brain.tests.stubs.local_model import LocalReply, OllamaStub, vector_for
from brain.tests.test_worker_program import WorkerProcess
from knowledge import embedding, reembedding, retrieval
from knowledge.models import Fact, Memory
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement

MODEL = "all-minilm"
NAME = f"worker:{MODEL}"


@pytest.fixture
def memory(transactional_db) -> Memory:
    """The default memory, committed: the live server and the worker read it from elsewhere."""
    return Memory.objects.default()


@pytest.fixture(autouse=True)
def _no_task_leaves_this_test(monkeypatch):
    """What teaching sends to Celery (a pass, the re-embedding) must not reach the shared test
    broker: the work is run here, in the test."""
    from brain.celery import app

    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: None)


@pytest.fixture
def key(memory) -> str:
    return workers.create_token(memory=memory, name="attic machine").key


@pytest.fixture
def stub() -> Iterator[OllamaStub]:
    with OllamaStub(models=(MODEL,)) as server:
        yield server


@pytest.fixture
def start_worker(live_server, stub) -> Iterator[Any]:
    started: list[WorkerProcess] = []

    def start(token: str) -> WorkerProcess:
        worker = WorkerProcess(
            "--server", live_server.url, "--token", token, "--model", MODEL,
            "--endpoint", stub.base_url, "--name", "attic", "--wait", "5",
        )  # fmt: skip
        started.append(worker)
        wait_until(
            lambda: Worker.objects.filter(name="attic").exists(),
            timeout=30,
            message=f"the worker never asked for a call:\n{worker.log}",
        )
        return worker

    yield start
    for worker in started:
        worker.close()


def embeds_to_worker(memory: Memory) -> None:
    workers.set_route(memory=memory, task="embed", provider="worker", model=MODEL)


def sent(stub: OllamaStub) -> list[str]:
    """Every text the stub was asked to embed, in order."""
    return [text for request in stub.embeds for text in request.body["input"]]


def stored(fact: Fact) -> list[float]:
    fact.refresh_from_db()
    assert fact.embedding is not None, "the fact has no vector"
    return list(fact.embedding)


def test_a_taught_fact_and_a_question_are_embedded_by_the_worker_the_memory_routes_embed_to(
    memory, key, stub, start_worker
):
    embeds_to_worker(memory)
    start_worker(key)
    text = "The loft hatch sticks in wet weather."
    # Its words answer it: the stub's vectors carry no meaning, and recall keeps only what is
    # relevant.
    question = "What sticks in wet weather?"

    fact = learn(Statement.typed(memory=memory, text=text, origin="typed")).fact
    block = retrieval.context(memory=memory, question=question, reader=SYSTEM)
    # Asked again: its vector is kept.
    retrieval.context(memory=memory, question=question, reader=SYSTEM)

    assert fact.embedder == NAME
    assert np.allclose(stored(fact), vector_for(text), atol=1e-6)
    assert sent(stub) == [text, question]
    assert all(request.body["model"] == MODEL for request in stub.embeds)
    assert "The loft hatch sticks in wet weather." in block.text
    calls = ModelCall.objects.filter(task="embed").order_by("pk")
    assert [(c.provider, c.model, c.state) for c in calls] == [("worker", MODEL, "ok")] * 2
    assert [c.worker_name for c in WaitingCall.objects.order_by("pk")] == ["attic", "attic"]


def test_recall_finds_by_the_meaning_the_worker_gives_a_fact_sharing_no_word_with_the_question(
    memory, key, stub, start_worker
):
    # The worker's model gives both texts one direction (not of unit length: brain scales it).
    stub.script_embed(LocalReply(vectors=[[3.0, 4.0] + [0.0] * 382]))
    embeds_to_worker(memory)
    start_worker(key)

    fact = learn(
        Statement.typed(memory=memory, text="The loft hatch sticks in wet weather.", origin="typed")
    ).fact
    block = retrieval.context(memory=memory, question="Where does the cat sleep?", reader=SYSTEM)
    plain = retrieval.plain_context(
        memory=memory, question="Which room is cold at night?", reader=SYSTEM
    )

    assert stored(fact)[:3] == pytest.approx([0.6, 0.8, 0.0])
    assert fact.pk in block.fact_ids
    assert fact.pk in plain.fact_ids


def test_with_no_worker_online_teaching_keeps_the_fact_recall_answers_by_words_and_a_worker_back_gives_it_its_vector(  # noqa: E501
    memory, key, stub, start_worker
):
    embeds_to_worker(memory)
    text = "The garage freezer is switched off in winter."

    started = time.monotonic()
    fact = learn(Statement.typed(memory=memory, text=text, origin="typed")).fact
    taught_in = time.monotonic() - started
    started = time.monotonic()
    again = learn(
        Statement.typed(memory=memory, text="The porch light is on a timer.", origin="typed")
    ).fact
    again_in = time.monotonic() - started
    embedding.forget_unanswered()  # the question asks the worker again, and waits its own time
    started = time.monotonic()
    block = retrieval.context(
        memory=memory, question="Is the garage freezer on in winter?", reader=SYSTEM
    )
    recalled_in = time.monotonic() - started

    # Kept, without a vector; the first write waited its deadline, the next did not wait at all.
    assert Fact.objects.filter(pk__in=[fact.pk, again.pk], embedding=None).count() == 2
    assert embedding.WRITE_TIMEOUT_S <= taught_in < embedding.WRITE_TIMEOUT_S + 2
    assert again_in < 1
    assert text in block.text
    assert embedding.QUESTION_TIMEOUT_S <= recalled_in < embedding.QUESTION_TIMEOUT_S + 2
    assert set(ModelCall.objects.filter(task="embed").values_list("state", flat=True)) == {
        "timeout"
    }
    status = reembedding.status(memory)
    assert status is not None and (status.embedder, status.counted) == (NAME, "0/2 facts")

    start_worker(key)
    done = reembedding.reembed_stale()

    assert done == 2
    assert np.allclose(stored(fact), vector_for(text), atol=1e-6)
    assert Fact.objects.get(pk=fact.pk).embedder == NAME
    assert reembedding.status(memory) is None


def test_switching_a_memorys_embed_route_to_a_worker_makes_only_its_vectors_stale_until_the_worker_re_embeds_them(  # noqa: E501
    memory, key, stub, start_worker, client, admin_user
):
    other = Memory.objects.create(slug="cabin", name="Cabin")
    texts = ["The loft is warm.", "The cellar is damp."]
    here = [learn(Statement.typed(memory=memory, text=t, origin="typed")).fact for t in texts]
    there = learn(
        Statement.typed(memory=other, text="The cabin stove smokes.", origin="typed")
    ).fact
    local_name = embedding.get_embedder().name
    assert {f.embedder for f in [*here, there]} == {local_name}
    before = stored(there)

    embeds_to_worker(memory)

    client.force_login(admin_user)
    page = client.get(reverse("memory:knowledge")).content.decode()
    assert f"Re-embedding for {NAME}: 0/2 facts" in page
    assert reembedding.status(other) is None
    # Recall compares no vector of another embedder meanwhile, and still answers by words.
    embedding.forget_unanswered()
    assert (
        here[0].pk
        in retrieval.context(memory=memory, question="Is the loft warm?", reader=SYSTEM).fact_ids
    )

    start_worker(key)
    done = reembedding.reembed_stale()

    assert done == 2
    assert reembedding.status(memory) is None
    for fact, text in zip(here, texts, strict=True):
        assert np.allclose(stored(fact), vector_for(text), atol=1e-6)
        assert Fact.objects.get(pk=fact.pk).embedder == NAME
    assert Fact.objects.get(pk=there.pk).embedder == local_name
    assert stored(there) == before
    assert texts[0] in sent(stub) and "The cabin stove smokes." not in sent(stub)
