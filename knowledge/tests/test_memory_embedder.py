"""A memory's own embedder, without a worker process: which memories take their vectors from a
worker (only those routing "embed" to one), how the route is kept per process, and what every
write and recall does when a worker embedder gives no vectors — here because a worker cannot
see a call written inside a transaction (each test runs in one), the same outcome as no worker
online (brain/tests/test_worker_embeddings.py runs those with a real worker)."""

from __future__ import annotations

import logging
import time

import pytest
from django.urls import reverse

from brain import llm, workers
from brain.llm import routing
from brain.models import ModelCall, WaitingCall
from knowledge import embedding, reembedding, retrieval
from knowledge.embedding import HashEmbedder, WorkerEmbedder, embedder_for
from knowledge.models import Fact, Memory
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement


@pytest.fixture
def cabin(db) -> Memory:
    return Memory.objects.create(slug="cabin", name="Cabin")


def to_worker(memory: Memory, model: str = "all-minilm") -> None:
    workers.set_route(memory=memory, task="embed", provider="worker", model=model)


def test_only_a_route_of_its_own_sends_a_memorys_vectors_to_a_worker_never_its_default(home, cabin):
    workers.set_route(memory=home, task="*", provider="worker", model="llama3.2")

    assert embedder_for(home).name == HashEmbedder.name
    assert routing.route_for(home, "embed") == routing.DEFAULT
    with pytest.raises(llm.LLMError, match="computed here"):
        llm.embed(memory=home, texts=["The loft is warm."], timeout=1)

    to_worker(home)

    assert isinstance(embedder_for(home), WorkerEmbedder)
    assert embedder_for(home).name == "worker:all-minilm"
    assert embedder_for(cabin).name == HashEmbedder.name
    to_worker(cabin, model="")
    assert embedder_for(cabin).name == "worker:default"
    long = "a-model-whose-name-is-much-longer-than-the-column-allows"
    to_worker(cabin, model=long)
    assert embedder_for(cabin).name == f"worker:{long}"[:40]
    assert len(embedder_for(cabin).name) == Fact._meta.get_field("embedder").max_length


def test_a_route_is_read_once_in_a_while_and_a_change_made_here_is_seen_at_once(
    home, django_assert_num_queries
):
    embedder_for(home)
    with django_assert_num_queries(0):
        assert embedder_for(home).name == HashEmbedder.name
        assert embedder_for(home.pk).name == HashEmbedder.name

    to_worker(home)
    assert embedder_for(home).name == "worker:all-minilm"
    workers.set_route(memory=home, task="embed", provider="")  # follows no worker again
    assert embedder_for(home).name == HashEmbedder.name


def test_the_settings_page_offers_the_embed_task_which_without_a_route_is_computed_here(
    signed_in,
):
    page = signed_in.get(reverse("settings:page")).content.decode()

    row = page[page.index('<tr data-task="embed">') :]
    row = row[: row.index("</tr>")]
    assert "Turn facts and questions into vectors" in row
    assert ">computed here</option>" in row


def test_teaching_keeps_the_fact_without_a_vector_when_the_worker_gives_none_and_judges_it_by_its_words(  # noqa: E501
    home,
):
    to_worker(home)
    started = time.monotonic()

    first = learn(
        Statement.typed(memory=home, text="The garage freezer is off in winter.", origin="typed")
    )
    again = learn(
        Statement.typed(memory=home, text="The garage freezer is off in winter.", origin="typed")
    )
    changed = learn(
        Statement.typed(memory=home, text="The garage freezer is on in winter.", origin="typed")
    )

    assert time.monotonic() - started < 2  # asked inside a transaction: no wait at all
    first.fact.refresh_from_db()
    assert (first.fact.embedding, first.fact.embedder) == (None, "")
    assert again.verdict == "same" and again.fact.pk == first.fact.pk
    assert Fact.objects.get(pk=first.fact.pk).support == 2
    assert changed.verdict in ("contradiction", "conflict")
    assert not WaitingCall.objects.exists() and not ModelCall.objects.exists()
    status = reembedding.status(home)
    assert status is not None and status.counted == "0/2 facts"


def test_recall_answers_by_words_and_subjects_when_the_worker_gives_no_vector_for_the_question(
    home,
):
    fact = learn(
        Statement.typed(memory=home, text="The loft hatch sticks in wet weather.", origin="typed")
    ).fact
    to_worker(home)

    block = retrieval.context(memory=home, question="Does the loft hatch stick?", reader=SYSTEM)
    plain = retrieval.plain_context(
        memory=home, question="Does the loft hatch stick?", reader=SYSTEM
    )
    found = retrieval.retrieve(memory=home, question="loft hatch", reader=SYSTEM)

    assert fact.pk in block.fact_ids and fact.pk in plain.fact_ids
    assert [f.pk for f in found] == [fact.pk]


def test_the_background_re_embedding_leaves_a_memory_whose_worker_gives_no_vectors_for_later_and_goes_on(  # noqa: E501
    home, cabin, caplog
):
    learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))
    there = learn(
        Statement.typed(memory=cabin, text="The cabin stove smokes.", origin="typed")
    ).fact
    to_worker(home)
    Fact.objects.filter(pk=there.pk).update(embedder="an-older-embedder")
    skipped = []

    with caplog.at_level(logging.WARNING, logger="knowledge.reembedding"):
        done = reembedding.reembed_stale(on_skip=lambda memory, why: skipped.append(memory))

    assert done == 1
    assert Fact.objects.get(pk=there.pk).embedder == HashEmbedder.name
    assert skipped == [home]
    warned = [r for r in caplog.records if r.name == "knowledge.reembedding"]
    assert [r.getMessage().split(":")[0] for r in warned] == [
        "Vectors for Home wait for its worker"
    ]
    assert reembedding.stale_facts(home).count() == 1
    assert reembedding.stale_facts().count() == 1
    with pytest.raises(reembedding.WorkerAway, match="Re-embedded 0 of 1"):
        reembedding.reembed(facts=Fact.objects.readable_by(SYSTEM).filter(memory=home))


@pytest.mark.django_db(transaction=True)
def test_a_failed_call_for_vectors_pauses_the_asking_of_writes_and_questions_not_of_the_background(
    home, monkeypatch
):
    to_worker(home)
    monkeypatch.setattr(embedding, "_unanswered", {})
    asked = []

    def no_answer(**kwargs):
        asked.append(kwargs["timeout"])
        raise llm.LLMTimeout("No worker answered in time: waiting for a worker.")

    monkeypatch.setattr(llm, "embed", no_answer)

    assert embedding.vector_or_none(embedder_for(home), "The loft is warm.") is None
    assert embedding.vector_or_none(embedder_for(home), "The hall is cold.") is None
    question = embedder_for(home, timeout=embedding.QUESTION_TIMEOUT_S)
    with pytest.raises(llm.LLMError, match="did not answer its last call"):
        question.embed_one("Is the loft warm?")
    with pytest.raises(llm.LLMTimeout):
        embedder_for(home, timeout=embedding.BACKGROUND_TIMEOUT_S, background=True).embed(["x"])

    assert asked == [embedding.WRITE_TIMEOUT_S, embedding.BACKGROUND_TIMEOUT_S]
