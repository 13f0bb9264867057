"""The synthetic household behind `make bench`: the facts it loads are the ones it promises."""

import numpy as np
import pytest
from django.db import connection

from bench import knowledge as bench
from knowledge.models import Fact, Memory, Subject


@pytest.fixture
def household(transactional_db):
    """Committed, as in `make bench`: the index is dropped and built outside a test transaction."""
    yield bench.generate_household(slug="bench-test", count=500)
    bench.delete_household("bench-test")


def test_the_generator_loads_the_requested_number_of_live_facts(household):
    live = Fact.objects.for_memory(household.memory).live()

    assert live.count() == 500
    assert sorted(live.values_list("pk", flat=True)) == household.fact_ids.tolist()


def test_every_loaded_vector_has_unit_length_and_matches_what_the_benchmark_compares(household):
    stored = dict(Fact.objects.for_memory(household.memory).values_list("pk", "embedding"))
    vectors = np.array([stored[pk] for pk in household.fact_ids.tolist()])

    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.allclose(vectors, household.vectors, atol=1e-6)


def test_one_subject_holds_two_percent_of_the_facts_and_every_other_fewer(household):
    sizes = {
        subject.name: subject.facts.count()
        for subject in Subject.objects.for_memory(household.memory)
    }

    assert len(sizes) == 40
    assert sizes.pop(household.big_subject.name) == 10  # 2% of 500
    assert max(sizes.values()) < 10


def test_the_hnsw_index_is_back_as_the_model_defines_it(household):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [bench.HNSW_INDEX])
        (definition,) = cursor.fetchone()

    assert "USING hnsw (embedding vector_cosine_ops)" in definition
    assert "m='16', ef_construction='128'" in definition


def test_deleting_the_household_leaves_no_fact_behind(household):
    memory_pk = household.memory.pk
    bench.delete_household("bench-test")

    assert not Fact.objects.filter(memory_id=memory_pk).exists()


def test_the_runs_first_household_deletes_those_an_earlier_run_left(transactional_db, monkeypatch):
    """They would share the facts' table and its indexes with the run's own households."""
    monkeypatch.setattr(bench, "_SHARED", {})
    left = bench.generate_household(slug="bench-real-1k", count=200).memory
    kept = Memory.objects.create(slug="bench-tab-empty", name="Not a household")
    try:
        made = bench.shared_household(300).memory

        assert not Memory.objects.filter(pk=left.pk).exists()
        assert not Fact.objects.filter(memory_id=left.pk).exists()
        assert Memory.objects.filter(pk=kept.pk).exists()
        assert Fact.objects.for_memory(made).live().count() == 300
    finally:
        bench.release_shared()
        bench.delete_household("bench-real-1k")
        kept.delete()


def test_recall_deletes_what_an_earlier_run_left_before_its_real_sentences(
    transactional_db, monkeypatch
):
    """The real sentences are measured alone in the table: beside a 100k household left from
    an earlier run their recall@10 fell from 0.998 to 0.970."""
    left = bench.generate_household(slug="bench-3k", count=200).memory
    seen = []
    monkeypatch.setattr(
        bench,
        "real_sentence_recall",
        lambda count: seen.append(Memory.objects.filter(pk=left.pk).exists()),
    )
    monkeypatch.setattr(bench, "sizes", lambda spec=None: [])
    monkeypatch.setattr(bench, "_recall_markdown", lambda *args: "")
    try:
        bench.recall_at_scale()
    finally:
        bench.delete_household("bench-3k")

    assert seen == [False]


def test_question_agreement_is_the_share_of_the_float_top_10_the_question_path_finds():
    """Three questions whose path gives the float vector find all ten, two whose path gives
    the opposite vector find none: 0.6, and the least cosine is -1."""
    rng = np.random.default_rng(5)
    stored = rng.normal(size=(200, 384)).astype(np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    asked = [f"question {i}" for i in range(5)]
    exact = stored[:5]

    class Embedder:
        def embed_question(self, text):
            i = int(text.split()[1])
            return (exact[i] if i < 3 else -exact[i]).tolist()

    agreement, lowest = bench.question_agreement(Embedder(), asked, exact, stored)

    assert agreement == pytest.approx(0.6)
    assert lowest == pytest.approx(-1.0, abs=1e-6)
