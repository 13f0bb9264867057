"""Vector indexes of their own for the memories that hold a small share of the facts.

The HNSW index on the facts' vectors (``fact_embedding_hnsw``) is one for the whole table, and
a search keeps a memory's rows only after it has walked the graph: a memory that holds a small
share of the table walks the other memories' nodes on its way to its own, and finds fewer of
its true neighbours. Measured with the benchmark's households, a 10k one beside a 100k one in
the same table: ``context()`` p50 17.7 ms, and 10.2 ms once it had an index of its own (built
in 1.6 s; the 100k one alone takes about 13); the benchmark's 10,000 real sentences beside the
100k household: recall@10 0.967, and 0.998 with an index of their own, as alone. A 5k one:
21.0 ms and 0.964, against 9.9 ms and 1.0. A home keeps its memory beside its agents' and its
teams', so this is the usual case, not a corner. Below OWN_MIN facts the planner reads the
memory's own rows and sorts them (500 and 2,000 facts beside 100k: recall@10 1.0, and the same
time with an index of their own or without).

So ``keep()`` gives a memory an index of its own when it holds at least OWN_MIN facts and at
most OWN_SHARE of the table's: a partial HNSW index (``WHERE memory_id = <its id>``), built as
the table's is (the same operator class, ``m`` and ``ef_construction``). Nothing in
``knowledge/search.py`` changes: the statements name the memory as a literal (Django binds
parameters on the client), and the planner takes the smaller index for that memory's
searches. A memory that holds most of the table (a home alone: the usual single-memory
install) has none, and the table's index serves it as before.

- Built with ``CREATE INDEX CONCURRENTLY``: writes go on while it builds (a build scans the
  table twice). One build per call, the smallest memory first (it gains the most and costs
  the least); the next call builds the next. A build that failed leaves an invalid index,
  which the next call drops and builds again.
- Dropped (``DROP INDEX CONCURRENTLY``) when its memory is gone, or holds more than
  DROP_SHARE of the table: the table's index then serves it nearly as well, and each write
  into a memory with an index of its own updates two HNSW graphs (about 0.9 ms a fact, the
  insert cost measured in the intake benchmark). The gap between the two shares keeps a
  memory near one line from being built and dropped by turns.
- Counted by facts, not vectors (a fact without a vector is a fact the re-embedding gives one
  soon), from the index on ``memory_id`` alone.
- One keeper at a time (an advisory lock: another call returns at once) and never inside a
  transaction, which ``CONCURRENTLY`` cannot run in. Beat runs it every ten minutes
  (``knowledge.tasks.keep_vector_indexes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q

from knowledge.models import Fact

TABLE_INDEX = "fact_embedding_hnsw"
PREFIX = "fact_hnsw_memory_"  # + the memory's id
OWN_MIN = 2_000  # facts below which the planner sorts the memory's rows itself (docstring)
OWN_SHARE = 0.5  # of the table's facts, at most, for a memory to get one
DROP_SHARE = 0.75  # of the table's facts above which a memory's own index is dropped
BUILD_MEMORY = "'1GB'"  # maintenance_work_mem for a build: a 100k graph is about 200 MB
_LOCK = 0x6272_6169_6E76_6978  # advisory lock key: one keeper at a time


@dataclass
class Kept:
    """What one call did: the memories whose index it built and those whose index it dropped
    (ids); ``busy`` when another keeper held the lock and this one did nothing."""

    built: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    busy: bool = False

    @property
    def message(self) -> str:
        if self.busy:
            return "Another process is keeping the vector indexes; nothing done."
        parts = [f"built for {_memories(self.built)}"] if self.built else []
        parts += [f"dropped for {_memories(self.dropped)}"] if self.dropped else []
        if not parts:
            return "Every memory's vector index is as it should be."
        return "Vector indexes of their own: " + "; ".join(parts) + "."


def _memories(ids: list[int]) -> str:
    return ("memory " if len(ids) == 1 else "memories ") + ", ".join(str(pk) for pk in ids)


def index_for(memory_id: int):
    """The HNSW index of one memory's facts, defined as the table's is, with its predicate."""
    table = next(index for index in Fact._meta.indexes if index.name == TABLE_INDEX)
    _path, args, kwargs = table.deconstruct()
    kwargs.update(name=f"{PREFIX}{int(memory_id)}", condition=Q(memory_id=int(memory_id)))
    return type(table)(*args, **kwargs)


def existing() -> dict[int, bool]:
    """The memories that have an index of their own: id → whether the index is valid (a
    build that failed half way leaves an invalid one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, i.indisvalid FROM pg_index i
               JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = 'knowledge_fact'::regclass AND c.relname LIKE %s""",
            [PREFIX.replace("_", r"\_") + "%"],
        )
        return {int(name.removeprefix(PREFIX)): valid for name, valid in cursor.fetchall()}


def _sizes() -> dict[int, int]:
    rows = Fact.objects.order_by().values("memory_id").annotate(n=Count("pk"))
    return {row["memory_id"]: row["n"] for row in rows}


def wanted(sizes: dict[int, int], have: set[int]) -> tuple[list[int], list[int]]:
    """Which memories should get an index of their own (smallest first) and which should lose
    theirs, from the facts each holds and the ones that have one."""
    total = sum(sizes.values())
    build = sorted(
        (pk for pk, n in sizes.items() if OWN_MIN <= n <= OWN_SHARE * total and pk not in have),
        key=lambda pk: (sizes[pk], pk),
    )
    drop = sorted(pk for pk in have if pk not in sizes or sizes[pk] > DROP_SHARE * total)
    return build, drop


def keep() -> Kept:
    """Build the next index a memory should have and drop those no memory should (see the
    module docstring). Raises RuntimeError inside a transaction."""
    if connection.in_atomic_block:
        raise RuntimeError("vector indexes are built concurrently, which no transaction allows")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK])
        if not cursor.fetchone()[0]:
            return Kept(busy=True)
    try:
        have = existing()
        sizes = _sizes()
        _, drop = wanted(sizes, set(have))
        drop = sorted(set(drop) | {pk for pk, valid in have.items() if not valid})
        for pk in drop:
            _drop(pk)
        # An invalid index, dropped, is wanted again like one never built.
        build, _ = wanted(sizes, {pk for pk in have if pk not in drop})
        for pk in build[:1]:
            _build(pk)
        return Kept(built=build[:1], dropped=drop)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK])


def _build(memory_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = {BUILD_MEMORY}")
        cursor.execute("SET statement_timeout = 0")  # a build outlasts a request's limit
    try:
        with connection.schema_editor(atomic=False) as editor:
            editor.add_index(Fact, index_for(memory_id), concurrently=True)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET statement_timeout")


def _drop(memory_id: int) -> None:
    with connection.schema_editor(atomic=False) as editor:
        editor.remove_index(Fact, index_for(memory_id), concurrently=True)
