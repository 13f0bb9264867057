"""Search indexes of their own for the memories that hold a small share of the facts.

The facts' search indexes are one for the whole table: the HNSW index of their vectors
(``fact_embedding_hnsw``) and the full-text index of their words (``fact_search_vector``). A
search keeps a memory's rows only after the index has given them: a memory that holds a small
share of the table walks the other memories' graph nodes on its way to its own (and finds
fewer of its true neighbours), and reads the other memories' rows that hold the question's
words only to drop them. Measured with the benchmark's households beside its 100k one, in a
shell over the benchmark's questions:

- a 10k memory: ``context()`` p50 17.8 ms (p95 22.6), and 9.8 (14.4) with indexes of its own
  (both built in 1.3 s; the 100k one alone takes about 13); asked again, its question's
  vector kept, 14.7 (19.6) against 8.0 (9.8). The vector index alone took it to 10.2 ms; the
  words index alone took its candidates statement from p50 4.9 / p95 9.9 ms to 3.7 / 5.2;
- a 5k memory, a vector index of its own: ``context()`` 21.0 ms and recall@10 0.964, against
  9.9 ms and 1.0;
- the benchmark's 10,000 real sentences, a vector index of their own: recall@10 0.967, against
  0.998 (as alone).

A home keeps its memory beside its agents' and its teams', so this is the usual case, not a
corner. Below OWN_MIN facts the planner reads the memory's own rows and sorts them by itself
(500 and 2,000 facts beside 100k: recall@10 1.0, and the same time with indexes of their own
or without).

So ``keep()`` gives a memory that holds at least OWN_MIN facts and at most OWN_SHARE of the
table's a copy of each of those indexes over its own rows: partial (``WHERE memory_id = <its
id>``), defined as the table's are (operator class, ``m``, ``ef_construction``, no pending
list). Nothing in ``knowledge/search.py`` changes: the statements name the memory as a literal
(Django binds parameters on the client), and the planner takes the smaller index for that
memory's searches. A memory that holds most of the table (a home alone: the usual
single-memory install) has none, and the table's indexes serve it as before.

- Built with ``CREATE INDEX CONCURRENTLY``: writes go on while they build (each build scans
  the table twice). One memory per call, the smallest first (it gains the most and costs the
  least); the next call does the next. A build that failed leaves an invalid index, which the
  next call drops and builds again, as it does a copy built before the table's index changed
  (migration 0024 made its graph denser).
- Dropped (``DROP INDEX CONCURRENTLY``) when their memory is gone, or holds more than
  DROP_SHARE of the table: the table's indexes then serve it nearly as well, and each write
  into a memory with indexes of its own updates two HNSW graphs (about 0.9 ms a fact more,
  the insert cost measured in the intake benchmark). The gap between the two shares keeps a
  memory near one line from being built and dropped by turns.
- Counted by facts, not vectors (a fact without a vector is one the re-embedding gives one
  soon), from the index on ``memory_id`` alone.
- One keeper at a time (an advisory lock: another call returns at once) and never inside a
  transaction, which ``CONCURRENTLY`` cannot run in. Beat runs it every ten minutes
  (``knowledge.tasks.keep_memory_indexes``); ``brain indexes`` does every memory at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q

from knowledge.models import Fact

#: The table's indexes a memory gets a copy of, by kind: the name of each in ``Fact.Meta``.
COPIED = {"hnsw": "fact_embedding_hnsw", "words": "fact_search_vector"}
PREFIX = "fact_own_"  # + kind + "_" + the memory's id
OWN_MIN = 2_000  # facts below which the planner sorts the memory's rows itself (docstring)
# Of the table's facts, at most, for a memory to get indexes of its own: at half, a search
# through the table's HNSW index walks about twice the nodes its own would.
OWN_SHARE = 0.5
DROP_SHARE = 0.75  # of the table's facts above which a memory's own indexes are dropped
BUILD_MEMORY = "'1GB'"  # maintenance_work_mem for a build: a 100k graph is about 200 MB
_LOCK = 0x6272_6169_6E76_6978  # advisory lock key: one keeper at a time


@dataclass
class Kept:
    """What one call did: the memories whose indexes it built and those whose indexes it
    dropped (ids); ``busy`` when another keeper held the lock and this one did nothing."""

    built: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    busy: bool = False

    @property
    def message(self) -> str:
        if self.busy:
            return "Another process is keeping the memories' indexes; nothing done."
        parts = [f"built for {_memories(self.built)}"] if self.built else []
        parts += [f"dropped for {_memories(self.dropped)}"] if self.dropped else []
        if not parts:
            return "Every memory's search indexes are as they should be."
        return "Search indexes of their own: " + "; ".join(parts) + "."


def _memories(ids: list[int]) -> str:
    return ("memory " if len(ids) == 1 else "memories ") + ", ".join(str(pk) for pk in ids)


def index_for(memory_id: int, kind: str):
    """The ``kind`` index of one memory's facts, defined as the table's is, with its
    predicate."""
    table = next(index for index in Fact._meta.indexes if index.name == COPIED[kind])
    _path, args, kwargs = table.deconstruct()
    memory_id = int(memory_id)
    kwargs.update(name=f"{PREFIX}{kind}_{memory_id}", condition=Q(memory_id=memory_id))
    return type(table)(*args, **kwargs)


def existing() -> dict[tuple[int, str], bool]:
    """The memories' own indexes: (memory id, kind) → whether the index is as it should be:
    valid (a build that failed half way leaves an invalid one) and built with the options the
    table's index has now (``m``, ``ef_construction``, ``fastupdate``: a copy made before the
    table's changed is built again)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, i.indisvalid, coalesce(c.reloptions, '{}') FROM pg_index i
               JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = 'knowledge_fact'::regclass AND c.relname LIKE %s""",
            [PREFIX.replace("_", r"\_") + "%"],
        )
        found = {}
        for name, valid, options in cursor.fetchall():
            kind, _, memory_id = name.removeprefix(PREFIX).rpartition("_")
            if memory_id.isdigit():  # not one of ours otherwise: left alone
                current = kind in COPIED and set(options) == _options(kind)
                found[int(memory_id), kind] = valid and current  # a kind no longer copied goes
        return found


def _options(kind: str) -> set[str]:
    """The storage options a copy of ``kind`` is built with, as ``pg_class.reloptions`` reads."""
    return {option.replace(" ", "") for option in index_for(0, kind).get_with_params()}


def _sizes() -> dict[int, int]:
    rows = (
        Fact.objects.as_system("how many facts each memory holds")
        .order_by()
        .values("memory_id")
        .annotate(n=Count("pk"))
    )
    return {row["memory_id"]: row["n"] for row in rows}


def wanted(sizes: dict[int, int], have: set[int]) -> tuple[list[int], list[int]]:
    """Which memories should get indexes of their own (smallest first) and which should lose
    theirs, from the facts each holds and the memories that have them."""
    total = sum(sizes.values())
    build = sorted(
        (pk for pk, n in sizes.items() if OWN_MIN <= n <= OWN_SHARE * total and pk not in have),
        key=lambda pk: (sizes[pk], pk),
    )
    drop = sorted(pk for pk in have if pk not in sizes or sizes[pk] > DROP_SHARE * total)
    return build, drop


def keep() -> Kept:
    """Build the indexes of the next memory that should have them, and drop those no memory
    should (see the module docstring). Raises RuntimeError inside a transaction."""
    if connection.in_atomic_block:
        raise RuntimeError("indexes are built concurrently, which no transaction allows")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK])
        if not cursor.fetchone()[0]:
            return Kept(busy=True)
    try:
        indexes = existing()
        sizes = _sizes()
        _, unwanted = wanted(sizes, {pk for pk, _ in indexes})
        gone = sorted(
            (pk, kind) for (pk, kind), current in indexes.items() if pk in unwanted or not current
        )
        for pk, kind in gone:
            _drop(pk, kind)
        left = {key for key in indexes if key not in gone}
        have = {pk for pk, _ in left}
        # A memory missing one of its indexes (a build failed, or was dropped invalid) gets
        # what it misses, before any memory that has none, whatever its share now.
        incomplete = {pk for pk in have if any((pk, kind) not in left for kind in COPIED)}
        build = sorted(incomplete, key=lambda pk: (sizes[pk], pk)) + wanted(sizes, have)[0]
        for pk in build[:1]:
            for kind in COPIED:
                if (pk, kind) not in left:
                    _build(pk, kind)
        dropped = sorted({pk for pk, _ in gone})
        return Kept(built=build[:1], dropped=dropped)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK])


def _build(memory_id: int, kind: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = {BUILD_MEMORY}")
        cursor.execute("SET statement_timeout = 0")  # a build outlasts a request's limit
    try:
        with connection.schema_editor(atomic=False) as editor:
            editor.execute(index_for(memory_id, kind).create_sql(Fact, editor, concurrently=True))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET statement_timeout")


def _drop(memory_id: int, kind: str) -> None:
    name = connection.ops.quote_name(f"{PREFIX}{kind}_{int(memory_id)}")
    with connection.cursor() as cursor:  # by name: a kind no longer copied goes too
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
