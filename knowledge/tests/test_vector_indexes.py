"""A memory that holds a small share of the facts gets an HNSW index of its own, which its
searches use; the index goes with its memory, or once the memory holds most of the facts."""

from io import StringIO

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from brain.db.copying import copy_create
from knowledge import search, tasks, vector_indexes
from knowledge.embedding import HashEmbedder
from knowledge.models import Fact, Memory

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [
    "kettle",
    "lamp",
    "boiler",
    "garden",
    "shed",
    "attic",
    "loft",
    "porch",
    "hall",
    "stairs",
    "cellar",
    "roof",
]


@pytest.fixture
def own_min(monkeypatch):
    """Indexes of their own from 20 facts; whatever a test built is dropped after it (an index
    outlives the rows the test database flushes)."""
    monkeypatch.setattr(vector_indexes, "OWN_MIN", 20)
    yield
    for pk in vector_indexes.existing():
        vector_indexes._drop(pk)


def facts(memory: Memory, count: int) -> list[Fact]:
    embedder = HashEmbedder()
    texts = [
        f"The {WORDS[i % len(WORDS)]} of {memory.slug} holds thing {i} by the {WORDS[i // 3 % 12]}."
        for i in range(count)
    ]
    return list(
        copy_create(
            [
                Fact(
                    memory=memory,
                    text=text,
                    normalized=text.lower(),
                    embedder=embedder.name,
                    embedding=vector,
                )
                for text, vector in zip(texts, embedder.embed(texts), strict=True)
            ]
        )
    )


def memory(slug: str) -> Memory:
    return Memory.objects.create(slug=slug, name=slug.title())


def test_a_memory_holding_a_small_share_of_the_facts_gets_an_index_its_searches_use(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    kept = facts(garden, 30)
    facts(shed, 10)  # under OWN_MIN

    done = vector_indexes.keep()

    assert done.built == [garden.pk] and done.dropped == []
    assert done.message == f"Vector indexes of their own: built for memory {garden.pk}."
    assert vector_indexes.existing() == {garden.pk: True}
    assert vector_indexes.keep().message == "Every memory's vector index is as it should be."

    question = HashEmbedder().embed_one("Where is the kettle of the garden?")
    with CaptureQueriesContext(connection) as queries:
        found = search.nearest(garden, question, limit=10)
    with transaction.atomic(), connection.cursor() as cursor:
        # A table this small would be read and sorted: leave the planner the two HNSW indexes.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        searched = next(q["sql"] for q in queries.captured_queries if "<=>" in q["sql"])
        cursor.execute("EXPLAIN " + searched)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"fact_hnsw_memory_{garden.pk}" in plan
    vectors = np.array([fact.embedding for fact in kept], dtype=np.float32)
    exact = [kept[i].pk for i in np.argsort(-(vectors @ np.array(question)))[:10]]
    assert [pk for pk, _ in found] == exact


def test_an_index_goes_with_its_memory_and_when_the_memory_holds_most_of_the_facts(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    facts(garden, 30)
    facts(shed, 25)
    assert vector_indexes.keep().built == [shed.pk]  # the smallest first, one a call
    assert vector_indexes.keep().built == [garden.pk]

    gone = shed.pk
    shed.delete()
    facts(garden, 400)  # 430 of 520: past DROP_SHARE

    done = vector_indexes.keep()
    assert done.dropped == sorted([garden.pk, gone])
    assert done.built == [home.pk]  # 90 of 520 now: a small share of the facts
    assert vector_indexes.existing() == {home.pk: True}


def test_a_memory_past_the_share_keeps_the_index_it_has_until_it_holds_most_facts():
    assert vector_indexes.wanted({1: 60_000, 2: 40_000}, set()) == ([2], [])
    assert vector_indexes.wanted({1: 60_000, 2: 40_000}, {1, 2}) == ([], [])
    assert vector_indexes.wanted({1: 80_000, 2: 20_000}, {1, 2}) == ([], [1])
    assert vector_indexes.wanted({2: 20_000, 3: 80_000}, {1, 2}) == ([], [1])  # 1 is gone
    assert vector_indexes.wanted({1: 99_500, 2: 500}, set()) == ([], [])  # under OWN_MIN
    # The smallest first: it gains the most from an index and costs the least to build.
    assert vector_indexes.wanted({1: 52_000, 2: 28_000, 3: 2_000, 4: 18_000}, set()) == (
        [3, 4, 2],
        [],
    )


def test_an_index_a_failed_build_left_invalid_is_dropped_and_built_again(own_min):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    vector_indexes.keep()
    with connection.cursor() as cursor:  # what CREATE INDEX CONCURRENTLY leaves when it fails
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [f"fact_hnsw_memory_{garden.pk}"],
        )
    assert vector_indexes.existing() == {garden.pk: False}

    done = vector_indexes.keep()

    assert done.dropped == [garden.pk] and done.built == [garden.pk]
    assert vector_indexes.existing() == {garden.pk: True}


def test_one_keeper_at_a_time(own_min):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [vector_indexes._LOCK])
        done = vector_indexes.keep()
    finally:
        other.close()
    assert done.busy and done.built == []
    assert done.message == "Another process is keeping the vector indexes; nothing done."
    assert vector_indexes.existing() == {}


def test_indexes_are_not_kept_inside_a_transaction():
    with transaction.atomic(), pytest.raises(RuntimeError, match="no transaction allows"):
        vector_indexes.keep()


def test_beat_keeps_them_every_ten_minutes_and_logs_what_it_did(own_min, caplog):
    entry = settings.CELERY_BEAT_SCHEDULE["knowledge-vector-indexes"]
    assert entry == {"task": "knowledge.tasks.keep_vector_indexes", "schedule": 600.0}
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)

    with caplog.at_level("INFO", logger="knowledge.tasks"):
        tasks.keep_vector_indexes.apply()
        tasks.keep_vector_indexes.apply()  # nothing left to do: nothing logged

    assert vector_indexes.existing() == {garden.pk: True}
    assert [r.getMessage() for r in caplog.records if r.name == "knowledge.tasks"] == [
        f"Vector indexes of their own: built for memory {garden.pk}."
    ]


def test_the_terminal_builds_every_index_at_once_and_says_so(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    facts(garden, 30)
    facts(shed, 25)
    out = StringIO()

    call_command("vector_indexes", stdout=out)

    assert out.getvalue().splitlines() == [
        f"Vector indexes of their own: built for memory {shed.pk}.",
        f"Vector indexes of their own: built for memory {garden.pk}.",
    ]
    assert vector_indexes.existing() == {garden.pk: True, shed.pk: True}
    out = StringIO()
    call_command("vector_indexes", stdout=out)
    assert out.getvalue() == "Every memory's vector index is as it should be.\n"
