"""A memory that holds a small share of the facts gets search indexes of its own (vectors and
words), which its searches use; they go with their memory, or once it holds most of the facts."""

from io import StringIO

import numpy as np
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from brain.db.copying import copy_create
from knowledge import memory_indexes, search, tasks
from knowledge.embedding import HashEmbedder
from knowledge.models import Fact, Memory

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = ["kettle", "lamp", "boiler", "garden", "shed", "attic"]
WORDS += ["loft", "porch", "hall", "stairs", "cellar", "roof"]


@pytest.fixture
def own_min(monkeypatch):
    """Indexes of their own from 20 facts; whatever a test built is dropped after it (an index
    outlives the rows the test database flushes)."""
    monkeypatch.setattr(memory_indexes, "OWN_MIN", 20)
    yield
    for pk, kind in memory_indexes.existing():
        memory_indexes._drop(pk, kind)


def owned() -> dict[int, bool]:
    """Each memory with indexes of its own: whether it has every kind, all valid."""
    found = memory_indexes.existing()
    return {pk: all(found.get((pk, kind)) for kind in memory_indexes.COPIED) for pk, _ in found}


def plan_of(sql: str, *settings: str) -> str:
    """The plan of ``sql`` with sequential scans and sorts off: a table this small would be
    read and sorted, so the planner chooses between the table's index and the memory's."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        for setting in settings:
            cursor.execute(setting)
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def facts(memory: Memory, count: int) -> list[Fact]:
    embedder = HashEmbedder()
    texts = [
        f"The {WORDS[i % len(WORDS)]} of {memory.slug} holds thing {i} by the {WORDS[i // 3 % 12]}."
        for i in range(count)
    ]
    made = copy_create(
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
    with connection.cursor() as cursor:  # the statistics autovacuum keeps, for the planner
        cursor.execute("ANALYZE knowledge_fact")
    return list(made)


def memory(slug: str) -> Memory:
    return Memory.objects.create(slug=slug, name=slug.title())


def test_a_memory_holding_a_small_share_of_the_facts_gets_indexes_its_searches_use(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    kept = facts(garden, 30)
    facts(shed, 10)  # under OWN_MIN

    done = memory_indexes.keep()

    assert done.built == [garden.pk] and done.dropped == []
    assert done.message == f"Search indexes of their own: built for memory {garden.pk}."
    assert memory_indexes.existing() == {(garden.pk, "hnsw"): True, (garden.pk, "words"): True}
    assert memory_indexes.keep().message == "Every memory's search indexes are as they should be."

    question = HashEmbedder().embed_one("Where is the kettle of the garden?")
    with CaptureQueriesContext(connection) as queries:
        found = search.nearest(garden, question, limit=10)
        words = search.text_matches(
            Fact.objects.as_system("the test reads its memory").for_memory(garden).live(),
            "kettle",
            10,
        )
    nearest_sql = next(q["sql"] for q in queries.captured_queries if "<=>" in q["sql"])
    assert f"fact_own_hnsw_{garden.pk}" in plan_of(nearest_sql)
    vectors = np.array([fact.embedding for fact in kept], dtype=np.float32)
    exact = [kept[i].pk for i in np.argsort(-(vectors @ np.array(question)))[:10]]
    assert [pk for pk, _ in found] == exact
    # A table this small is walked newest first for its words; the plan that asks the words'
    # index takes the memory's own.
    words_sql = next(q["sql"] for q in queries.captured_queries if "@@" in q["sql"])
    assert f"fact_own_words_{garden.pk}" in plan_of(words_sql, "SET LOCAL enable_indexscan = off")
    assert {fact.pk for fact in words} == {fact.pk for fact in kept if "kettle" in fact.text}


def test_indexes_go_with_their_memory_and_when_it_holds_most_of_the_facts(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    facts(garden, 30)
    facts(shed, 25)
    assert memory_indexes.keep().built == [shed.pk]  # the smallest first, one a call
    assert memory_indexes.keep().built == [garden.pk]

    gone = shed.pk
    shed.delete()
    facts(garden, 400)  # 430 of 520: past DROP_SHARE

    done = memory_indexes.keep()
    assert done.dropped == sorted([garden.pk, gone])
    assert done.built == [home.pk]  # 90 of 520 now: a small share of the facts
    assert owned() == {home.pk: True}


def test_a_memory_past_the_share_keeps_its_indexes_until_it_holds_most_facts():
    assert memory_indexes.wanted({1: 60_000, 2: 40_000}, set()) == ([2], [])
    assert memory_indexes.wanted({1: 60_000, 2: 40_000}, {1, 2}) == ([], [])
    assert memory_indexes.wanted({1: 80_000, 2: 20_000}, {1, 2}) == ([], [1])
    assert memory_indexes.wanted({2: 20_000, 3: 80_000}, {1, 2}) == ([], [1])  # 1 is gone
    assert memory_indexes.wanted({1: 99_500, 2: 500}, set()) == ([], [])  # under OWN_MIN
    # The smallest first: it gains the most from indexes and costs the least to build.
    assert memory_indexes.wanted({1: 52_000, 2: 28_000, 3: 2_000, 4: 18_000}, set()) == (
        [3, 4, 2],
        [],
    )


def test_an_index_a_failed_build_left_invalid_is_dropped_and_built_again(own_min):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    memory_indexes.keep()
    with connection.cursor() as cursor:  # what CREATE INDEX CONCURRENTLY leaves when it fails
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [f"fact_own_hnsw_{garden.pk}"],
        )
    assert memory_indexes.existing() == {(garden.pk, "hnsw"): False, (garden.pk, "words"): True}

    done = memory_indexes.keep()

    assert done.dropped == [garden.pk] and done.built == [garden.pk]
    assert owned() == {garden.pk: True}


def test_one_keeper_at_a_time(own_min):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [memory_indexes._LOCK])
        done = memory_indexes.keep()
    finally:
        other.close()
    assert done.busy and done.built == []
    assert done.message == "Another process is keeping the memories' indexes; nothing done."
    assert memory_indexes.existing() == {}


def test_indexes_are_not_kept_inside_a_transaction():
    with transaction.atomic(), pytest.raises(RuntimeError, match="no transaction allows"):
        memory_indexes.keep()


def test_beat_keeps_them_every_ten_minutes_and_logs_what_it_did(own_min, caplog):
    entry = settings.CELERY_BEAT_SCHEDULE["knowledge-memory-indexes"]
    assert entry == {"task": "knowledge.tasks.keep_memory_indexes", "schedule": 600.0}
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)

    with caplog.at_level("INFO", logger="knowledge.tasks"):
        tasks.keep_memory_indexes.apply()
        tasks.keep_memory_indexes.apply()  # nothing left to do: nothing logged

    assert owned() == {garden.pk: True}
    assert [r.getMessage() for r in caplog.records if r.name == "knowledge.tasks"] == [
        f"Search indexes of their own: built for memory {garden.pk}."
    ]


def test_the_terminal_builds_every_memorys_indexes_at_once_and_says_so(own_min):
    home, garden, shed = memory("house"), memory("garden"), memory("shed")
    facts(home, 90)
    facts(garden, 30)
    facts(shed, 25)
    out = StringIO()

    call_command("indexes", stdout=out)

    assert out.getvalue().splitlines() == [
        f"Search indexes of their own: built for memory {shed.pk}.",
        f"Search indexes of their own: built for memory {garden.pk}.",
    ]
    assert owned() == {garden.pk: True, shed.pk: True}
    out = StringIO()
    call_command("indexes", stdout=out)
    assert out.getvalue() == "Every memory's search indexes are as they should be.\n"


def test_the_terminal_stops_when_what_it_built_comes_back_invalid(own_min, monkeypatch):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    build = memory_indexes._build

    def invalid_build(memory_id, kind):  # as a build the database could not finish leaves it
        build(memory_id, kind)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
                [f"fact_own_{kind}_{memory_id}"],
            )

    monkeypatch.setattr(memory_indexes, "_build", invalid_build)
    out = StringIO()
    with pytest.raises(CommandError, match=f"memory {garden.pk} were built twice in a row"):
        call_command("indexes", stdout=out)
    assert out.getvalue().splitlines()[0] == (
        f"Search indexes of their own: built for memory {garden.pk}."
    )


def test_a_copy_built_before_the_tables_index_changed_is_built_again(own_min):
    home, garden = memory("house"), memory("garden")
    facts(home, 90)
    facts(garden, 30)
    memory_indexes.keep()
    with connection.cursor() as cursor:  # as the copies made before migration 0024 were
        cursor.execute(f"ALTER INDEX fact_own_hnsw_{garden.pk} SET (ef_construction = 64)")
    assert memory_indexes.existing() == {(garden.pk, "hnsw"): False, (garden.pk, "words"): True}

    done = memory_indexes.keep()

    assert done.dropped == [garden.pk] and done.built == [garden.pk]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE relname = %s", [f"fact_own_hnsw_{garden.pk}"]
        )
        assert cursor.fetchone()[0] == ["m=16", "ef_construction=128"]
