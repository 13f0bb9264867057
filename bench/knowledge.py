"""Recall at scale (one of `make bench`'s BENCHMARKS): a synthetic household of 10k and
100k live facts in a memory of its own, in the database the app uses (1M with `make bench
SIZES=1m`, on its own: loading and indexing 1M take longer than the whole default run may);
context() timed against the plain path it replaced, an exact numpy scan of the same vectors and
brainmem 0.3.0's context() on the same facts, recall@10 of the vector path (on synthetic
vectors and on real MiniLM vectors of real sentences), and the intake rate through the full
write gate into a 100k-fact memory.

The vectors are synthetic, not embedded: the real embedder takes milliseconds a sentence, hours
at 1M. Each fact's vector is the sum of the "meanings" its text is made of (its template, its
subject, the values filled in), each worded a little differently, normalised: clustered like
sentence embeddings, with facts about one subject near each other (see ``Meanings``). Question
vectors for recall come from the same process, so they land among the facts as real questions
do.

Hazard: loading drops the model's HNSW index (one index over every memory's facts) and builds
it again afterwards, because building it is far faster than inserting into it; meanwhile other
memories' vector searches run without it. ``ensure_hnsw_index`` always puts it back as the model
defines it, and the benchmark memories are deleted when a benchmark ends (a rerun starts from
scratch: left in place, their rows would slow every other memory's vector search).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import statistics
import string
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
from django.db import connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

from bench import sections
from knowledge import embedding, retrieval, search, statements
from knowledge.embedding import DIMENSIONS, embed_question, get_embedder
from knowledge.models import Fact, Memory, Source, Subject
from knowledge.read_layer import SYSTEM
from memory import ask
from memory.taught import Statement

SIZES = (10_000, 100_000)  # `make bench`; `make bench SIZES=1m` measures 1M on its own
QUERIES = 200
INTAKE = 200
INTAKE_FACTS = 100_000  # the memory taught into: the 100k
SHARED_SIZES = (100_000,)  # households read by more than one benchmark (shared_household)
BIG_SUBJECT_SHARE = 0.02
SPREAD_DIMS = 6  # wording directions per building block of a synthetic vector
SPREAD = 0.22  # how far along them: a fact keeps cos ~0.88 with the meaning it words
NOISE = 0.01  # per dimension, so no two facts are the same point
PART_WEIGHTS = (1.0, 0.8, 0.4)  # in a vector: the template, the subject, each filled-in value
MAX_PARTS = 6  # a template, a subject and up to four filled-in values
MEANINGS_SEED = 0  # one "language" for every household and its questions
HNSW_INDEX = "fact_embedding_hnsw"

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SLOTS = {
    "hour": ["5", "6", "7", "8", "9"],
    "minute": ["00", "15", "30", "45"],
    "late": ["9", "10", "11"],
    "temp": ["18", "19", "20", "21", "22"],
    "day": DAYS,
    "month": ["January", "March", "May", "July", "September", "November"],
    "season": ["winter", "spring", "summer", "autumn"],
    "use": ["gym", "playroom", "workshop", "quiet room", "office"],
    "opening": ["window", "door", "skylight"],
    "nickname": ["beacon", "moon", "lighthouse", "glow", "big light", "sun"],
    "delta": ["1", "2", "3"],
    "n": ["2", "3", "4", "6", "8", "12"],
}
TEMPLATES: dict[str | None, list[str]] = {
    Subject.Kind.ROOM: [
        "The {room} gets cold quickly when the {opening} is open.",
        "Guests sleep in the {room} when they stay.",
        "The {room} is used as a {use} on {day}s.",
        "The {room} is aired every morning around {hour}:{minute}.",
        "On weekdays the {room} lights come on at {hour}:{minute}.",
        "The {room} blinds close at sunset in {season}.",
        "Nobody should set the {room} heating above {temp} degrees.",
    ],
    Subject.Kind.PERSON: [
        "{person} likes it at {temp} degrees in the evening.",
        "{person} prefers warm white light after sunset in {season}.",
        "{person} is up at {hour}:{minute} on {day}s.",
        "{person} likes music on {day} mornings.",
        "{person} wants no notifications after {late} pm.",
    ],
    Subject.Kind.DEVICE: [
        "The {device} drops offline for a minute around {hour} am; it recovers by itself.",
        "The {device} is called the {nickname}.",
        "The {device} reads about {delta} degrees high in direct sun.",
        "The {device} needs re-pairing after power cuts in {season}.",
        "The {device} battery was replaced in {month}.",
        "The {device} should stay off between {late} pm and {hour} am.",
    ],
    Subject.Kind.HOUSE: [
        "The house runs the heat pump at {temp} degrees flow temperature in {season}.",
        "The house alarm is set at {late} pm when everyone is out.",
        "The house goes into away mode after {n} hours with nobody home.",
        "The solar panels on the house export most in {month}.",
    ],
    None: [  # about nothing the house has a subject for
        "Bins go out on {day} evening.",
        "The dog gets fed at {hour} and {late}.",
        "The window cleaner comes on the first {day} of the month.",
        "Parcels go to the neighbour at number {n} when nobody answers.",
        "The water is hard here; the kettle needs descaling every {n} weeks.",
        "Quiet hours start at {late} pm on weeknights.",
        "Energy is cheapest between {late} pm and {hour} am.",
        "The heating schedule changes in {month}.",
    ],
}
NEW_FACTS = [  # for intake: statements no household template makes
    "{person} is allergic to {thing}.",
    "The spare {thing} is kept in the {room} cupboard.",
    "{person} bought new {thing} in {month}.",
    "The {room} needs new {thing} before {season}.",
    "{person} borrowed the {thing} from the neighbour at number {n}.",
]
THINGS = [
    "cats", "pollen", "peanuts", "ladder", "drill", "kettle", "toaster", "umbrella", "torch",
    "extension lead", "hoover bags", "light bulbs", "batteries", "fuses", "candles", "blankets",
]  # fmt: skip
KINDS = {Subject.Kind.PERSON: Fact.Kind.PREFERENCE, Subject.Kind.DEVICE: Fact.Kind.QUIRK}
ROOMS = [
    "kitchen", "living room", "hallway", "landing", "main bedroom", "back bedroom", "office",
    "study", "bathroom", "en-suite", "utility room", "garage", "loft", "porch", "dining room",
    "conservatory", "cellar", "nursery", "guest room", "shed",
]  # fmt: skip
PEOPLE = ["Sarah", "Tom", "Priya", "Luca", "Grandma Jean", "Ollie", "Mia"]
DEVICES = [
    ("kitchen ceiling light", "light.kitchen_ceiling"),
    ("living room lamp", "light.living_room_lamp"),
    ("hallway motion sensor", "binary_sensor.hallway_motion"),
    ("office lamp", "light.office_lamp"),
    ("main bedroom radiator valve", "climate.main_bedroom_trv"),
    ("bathroom fan", "fan.bathroom"),
    ("garage smart plug", "switch.garage_plug"),
    ("landing ceiling light", "light.landing_ceiling"),
    ("utility room dehumidifier", "humidifier.utility_room"),
    ("porch camera", "camera.porch"),
    ("study speaker", "media_player.study"),
    ("nursery thermostat", "climate.nursery"),
]


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


# The household --------------------------------------------------------------------------------


@dataclass
class Household:
    """A benchmark memory and, row for row, what was loaded into it."""

    memory: Memory
    subjects: list[Subject]
    big_subject: Subject
    fact_ids: np.ndarray  # int64, the row order of ``vectors``
    vectors: np.ndarray  # float32 unit rows
    subject_rows: np.ndarray  # index into ``subjects`` per row, -1 for none
    load_seconds: float
    index_seconds: float
    table_bytes: int = 0  # the facts table with its indexes, every memory's rows in it
    hnsw_bytes: int = 0

    def rows_about(self, subject: Subject) -> np.ndarray:
        return np.flatnonzero(self.subject_rows == self.subjects.index(subject))


class Meanings:
    """The building blocks of synthetic vectors. Each template, subject and filled-in value
    has a random direction (its meaning) and SPREAD_DIMS more (the ways it gets worded).

    A statement's vector is the weighted sum of its blocks' meanings, each moved a random
    amount along its own wording directions, plus a little noise, normalised. So facts that
    say the same thing sit close without being copies, and vary along a few dimensions, as
    sentence embeddings do, rather than along all 384 (which no index could search well).
    """

    def __init__(self, subject_count: int, seed: int):
        self.keys: dict[tuple, int] = {}
        for kind, templates in TEMPLATES.items():
            for template in templates:
                self.keys[("template", kind, template)] = len(self.keys)
        for index in range(subject_count):
            self.keys[("subject", index)] = len(self.keys)
        for slot, values in SLOTS.items():
            for value in values:
                self.keys[(slot, value)] = len(self.keys)
        rng = np.random.default_rng(seed)
        blocks = rng.standard_normal((len(self.keys) + 1, SPREAD_DIMS + 1, DIMENSIONS))
        blocks /= np.linalg.norm(blocks, axis=2, keepdims=True)
        blocks[-1] = 0  # padding
        self.blocks = blocks.astype(np.float32)
        self.padding = len(self.keys)

    def vectors(self, parts: np.ndarray, weights: np.ndarray, rng) -> np.ndarray:
        """Unit vectors for rows of block indices (padded), in chunks to bound memory."""
        out = np.empty((len(parts), DIMENSIONS), dtype=np.float32)
        step = 4096
        for start in range(0, len(parts), step):
            chunk, weight = parts[start : start + step], weights[start : start + step]
            amounts = rng.standard_normal((*chunk.shape, SPREAD_DIMS + 1), dtype=np.float32)
            amounts *= SPREAD
            amounts[:, :, 0] = 1  # the meaning itself
            amounts *= weight[:, :, None]
            summed = np.einsum("nkl,nkld->nd", amounts, self.blocks[chunk])
            summed += rng.standard_normal(summed.shape, dtype=np.float32) * NOISE
            out[start : start + len(chunk)] = summed / np.linalg.norm(summed, axis=1)[:, None]
        return out


class Sampler:
    """Household statements (text, block indices, subject index), the same for the same seed."""

    def __init__(self, subjects: list[Subject], shares: list[float], seed: int):
        self.subjects = subjects
        self.shares = shares
        self.meanings = Meanings(len(subjects), MEANINGS_SEED)
        self.rng = random.Random(seed)

    def statement(self, subject_index: int) -> tuple[str, list[int], list[float]]:
        subject = self.subjects[subject_index] if subject_index >= 0 else None
        kind = subject.kind if subject is not None else None
        template = self.rng.choice(TEMPLATES[kind])
        keys = self.meanings.keys
        parts, weights = [keys[("template", kind, template)]], [PART_WEIGHTS[0]]
        if subject is not None:
            parts.append(keys[("subject", subject_index)])
            weights.append(PART_WEIGHTS[1])
        values: dict[str, str] = {}
        if subject is not None:
            values[subject.kind] = subject.name  # the placeholder is named for the kind: {room}
        for name in _fields(template):
            if name in SLOTS:
                values[name] = self.rng.choice(SLOTS[name])
                parts.append(keys[(name, values[name])])
                weights.append(PART_WEIGHTS[2])
        return template.format(**values), parts, weights

    def subject_indices(self, count: int) -> np.ndarray:
        """Exactly round(share × count) rows per subject, the rest about no subject, shuffled."""
        rows = np.full(count, -1, dtype=np.int64)
        start = 0
        for index, share in enumerate(self.shares):
            size = round(share * count)
            rows[start : start + size] = index
            start += size
        np.random.default_rng(self.rng.randrange(2**32)).shuffle(rows)
        return rows

    def sample(self, subject_rows: np.ndarray, np_rng) -> tuple[list[str], np.ndarray]:
        texts = []
        parts = np.full((len(subject_rows), MAX_PARTS), self.meanings.padding, dtype=np.int64)
        weights = np.zeros((len(subject_rows), MAX_PARTS), dtype=np.float32)
        for row, subject_index in enumerate(subject_rows.tolist()):
            text, these, those = self.statement(subject_index)
            texts.append(text)
            parts[row, : len(these)] = these
            weights[row, : len(those)] = those
        return texts, self.meanings.vectors(parts, weights, np_rng)


def household_subjects(memory: Memory) -> list[Subject]:
    """The house, 20 rooms, 7 people and 12 devices: 40 subjects, the kitchen first."""
    rooms = [Subject(memory=memory, kind=Subject.Kind.ROOM, name=name) for name in ROOMS]
    people = [Subject(memory=memory, kind=Subject.Kind.PERSON, name=name) for name in PEOPLE]
    devices = [
        Subject(memory=memory, kind=Subject.Kind.DEVICE, name=name, entity_id=entity_id)
        for name, entity_id in DEVICES
    ]
    house = Subject(memory=memory, kind=Subject.Kind.HOUSE, name="house")
    return Subject.objects.bulk_create([*rooms, house, *people, *devices])


def subject_shares(count: int) -> list[float]:
    """The first subject holds BIG_SUBJECT_SHARE; the others from 1.8% down to 0.5%."""
    others = [0.018 - 0.013 * i / (count - 2) for i in range(count - 1)]
    return [BIG_SUBJECT_SHARE, *others]


def generate_household(
    *, slug: str, count: int, seed: int = 1, given: tuple[list[str], np.ndarray] | None = None
) -> Household:
    """A new memory ``slug`` holding ``count`` live synthetic facts over 40 subjects, one of
    which (the kitchen) holds BIG_SUBJECT_SHARE of them; the rest are about no subject.
    ``given``: texts and their vectors to load instead of the synthetic ones (real sentences),
    spread over the same subjects in the same shares.

    Bulk-loaded with COPY with the HNSW index dropped, then the index is built again (timed)
    and the tables analysed. Raises when ``slug`` exists. Learning is off in the memory, so no
    consolidation pass is ever asked for it.
    """
    memory = Memory.objects.create(slug=slug, name=f"Benchmark {slug}", learning=False)
    source = Source.objects.create(
        memory=memory, kind=Source.Kind.IMPORT, title=f"Synthetic household of {count:,} facts"
    )
    subjects = household_subjects(memory)
    sampler = Sampler(subjects, subject_shares(len(subjects)), seed)
    subject_rows = sampler.subject_indices(count)
    if given is None:
        texts, vectors = sampler.sample(subject_rows, np.random.default_rng(seed))
    else:
        texts, vectors = given[0][:count], given[1][:count]
    started = time.perf_counter()
    drop_hnsw_index()
    try:
        with _unhurried(), transaction.atomic():
            kinds = [subjects[i].kind if i >= 0 else None for i in subject_rows.tolist()]
            passage = _household_passage(source)
            fact_ids = _copy_facts(source, texts, vectors, kinds, seed, passage.label_set_id)
            _copy_subject_links(fact_ids, subject_rows, subjects)
            _copy_citations(passage, fact_ids)
        load_seconds = time.perf_counter() - started
        started = time.perf_counter()
    finally:
        ensure_hnsw_index()
    index_seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        settle(cursor)
        cursor.execute(
            "SELECT pg_total_relation_size('knowledge_fact'), pg_relation_size(%s::regclass)",
            [HNSW_INDEX],
        )
        table_bytes, hnsw_bytes = cursor.fetchone()
    return Household(
        memory,
        subjects,
        subjects[0],
        fact_ids,
        vectors,
        subject_rows,
        load_seconds,
        index_seconds,
        table_bytes,
        hnsw_bytes,
    )


# What recall reads of a memory's facts (knowledge/search.py): read into shared buffers first.
RECALL_RELATIONS = (
    "knowledge_fact",
    "knowledge_fact_pkey",
    "fact_embedding_hnsw",
    "fact_words",
    "fact_search_vector",
    "fact_memory_id",
    "knowledge_fact_subjects",
)


LOADED = "knowledge_fact, knowledge_fact_subjects, knowledge_citation, knowledge_passage"
# What else deleting a household deletes rows of (with its memory, or by SQL).
DELETED = "knowledge_observation, knowledge_passagelabel, knowledge_source"


def settle(cursor) -> None:
    """The state a running server keeps a loaded memory in, not the one a bulk load leaves.

    - VACUUM ANALYZE of every table the load wrote: autovacuum's, within a minute of the load on
      a live server. It marks the pages all-visible, which the walk of ``fact_words`` needs to
      read the index alone. The citations need their statistics too: without them the trigger
      that keeps a new fact's label sets scanned all 100k of them for each statement taught
      (its citation took 78 ms instead of 0.6).
    - The facts' table and the indexes recall reads, read into shared buffers (``pg_prewarm``,
      shipped with PostgreSQL): COPY and the index build write around the buffer cache (their
      ring buffers), so a household loaded a moment ago is read from the page cache on its
      first use, which no server that has been answering questions for a while does. Where the
      extension is missing, the colder figures are measured.

    Neither runs inside a transaction (a test's): VACUUM cannot, and there is nothing to warm.
    """
    if connection.in_atomic_block:
        cursor.execute(f"ANALYZE {LOADED}")
        return
    with _unhurried():
        cursor.execute(f"VACUUM ANALYZE {LOADED}")
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if cursor.fetchone() is not None:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            for relation in RECALL_RELATIONS:
                cursor.execute("SELECT pg_prewarm(%s::regclass)", [relation])


_COPY_TYPES = {
    "BigAutoField": "int8",
    "ForeignKey": "int8",
    "UUIDField": "uuid",
    "FloatField": "float8",
    "IntegerField": "int4",
    "PositiveIntegerField": "int4",
    "BooleanField": "bool",
    "DateTimeField": "timestamptz",
    "VectorField": "vector",
    "ArrayField": "int8[]",  # Fact.label_sets (kept by the database from citations)
}


def _copy_facts(source, texts, vectors, subject_kinds, seed, label_set: int) -> np.ndarray:
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    rng = random.Random(seed)
    now = timezone.now()
    normalised: dict[str, str] = {}
    # Every column the model has, so a field added later gets its default rather than a
    # broken COPY.
    fields = [
        field
        for field in Fact._meta.concrete_fields
        if not field.primary_key and not field.generated
    ]
    columns = ", ".join(connection.ops.quote_name(str(field.column)) for field in fields)
    types = [_COPY_TYPES.get(field.get_internal_type(), "text") for field in fields]
    kinds = [KINDS.get(kind, Fact.Kind.NOTE) for kind in subject_kinds]
    # Labelled as the configured embedder's: search reads only those, and the re-embedding
    # task would otherwise replace them all.
    embedder = get_embedder().name
    with connection.cursor() as cursor:
        raw = cursor.cursor
        # On this cursor only: the ORM's connection keeps reading vectors as text.
        register_vector_info(raw, TypeInfo.fetch(raw.connection, "vector"))
        with raw.copy(f"COPY knowledge_fact ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row, text in enumerate(texts):
                if text not in normalised:
                    normalised[text] = statements.normalise(text)
                created = now - timedelta(minutes=rng.randrange(2 * 365 * 24 * 60))
                confidence = round(rng.uniform(0.3, 0.95), 2)
                status = Fact.Status.QUEUED if rng.random() < 0.1 else Fact.Status.FILED
                values = {
                    "memory_id": source.memory_id,
                    "source_id": source.pk,
                    "text": text,
                    "normalized": normalised[text],
                    "kind": kinds[row],
                    "channel": Fact.Channel.IMPORT,
                    "confidence": confidence,
                    "prior": confidence,
                    "support": rng.randint(1, 5),
                    "valid_from": created,
                    "status": status,
                    "in_document": status == Fact.Status.FILED,
                    "embedding": vectors[row],
                    "embedder": embedder,
                    "created_at": created,
                    # What citing the household's passage gives it (see _copy_citations).
                    "label_sets": [label_set],
                }
                copy.write_row(
                    [
                        values[field.attname] if field.attname in values else field.get_default()
                        for field in fields
                    ]
                )
        cursor.execute(
            "SELECT id FROM knowledge_fact WHERE source_id = %s ORDER BY id", [source.pk]
        )
        # COPY numbers rows in the order written; other sessions' rows have other sources.
        return np.array([row[0] for row in cursor.fetchall()], dtype=np.int64)


def _copy_subject_links(fact_ids, subject_rows, subjects) -> None:
    with connection.cursor() as cursor:
        sql = "COPY knowledge_fact_subjects (fact_id, subject_id) FROM STDIN (FORMAT BINARY)"
        with cursor.cursor.copy(sql) as copy:
            copy.set_types(["int8", "int8"])
            for row in np.flatnonzero(subject_rows >= 0).tolist():
                copy.write_row((int(fact_ids[row]), subjects[subject_rows[row]].pk))


def _household_passage(source):
    """The one passage every fact of the household cites, labelled as the memory labels what
    it is told (Household: everyone reads it), so a reader reads the household as they would a
    taught one (knowledge/visibility.py)."""
    from knowledge import passages

    (passage,) = passages.add(source, [source.title])
    passage.refresh_from_db(fields=["label_set"])
    return passage


def _copy_citations(passage, fact_ids) -> None:
    """Each fact cites ``passage``. The facts were written with its label set already, so the
    triggers that keep each fact's label sets in step with its citations (and check a fact
    cites a passage of its own memory, which holds by construction here) have nothing to do,
    and are not run: on one run their statement over 100k new citations, planned on
    statistics from before the load, was still running after six minutes (it took seconds on
    another). Only this loader skips them; every write of the app goes through them."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        sql = "COPY knowledge_citation (fact_id, passage_id) FROM STDIN (FORMAT BINARY)"
        with cursor.cursor.copy(sql) as copy:
            copy.set_types(["int8", "int8"])
            for fact_id in fact_ids.tolist():
                copy.write_row((fact_id, passage.pk))
        cursor.execute("SET LOCAL session_replication_role = origin")


@contextmanager
def _unhurried():
    """No statement timeout, and room to build the index in memory, for this session only."""
    settings = {
        "statement_timeout": "0",
        "maintenance_work_mem": "'4GB'",  # the 1M index is about 2 GB: built in memory
        "max_parallel_maintenance_workers": "1",  # two cores
    }
    with connection.cursor() as cursor:
        for name, value in settings.items():
            cursor.execute(f"SET {name} = {value}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for name in settings:
                cursor.execute(f"RESET {name}")


def _hnsw_index():
    return next(index for index in Fact._meta.indexes if index.name == HNSW_INDEX)


def _hnsw_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [HNSW_INDEX])
        return cursor.fetchone() is not None


def drop_hnsw_index() -> None:
    if _hnsw_exists():
        with connection.schema_editor() as editor:
            editor.remove_index(Fact, _hnsw_index())


def ensure_hnsw_index() -> None:
    """Build the HNSW index exactly as the model defines it, unless it is there. Safe to run
    twice."""
    if not _hnsw_exists():
        with _unhurried(), connection.schema_editor() as editor:
            editor.add_index(Fact, _hnsw_index())


def delete_household(slug: str) -> None:
    """Delete a benchmark memory and everything in it. Safe to run twice.

    Its bulk rows go by SQL and are vacuumed away while the HNSW index is dropped, then the
    index is built again over what is left (vacuuming them out of the graph would cost more);
    the few rows the gate wrote go through the ORM with the memory. A transaction open
    elsewhere in the cluster while this runs keeps the deleted rows from being vacuumed; the
    index then holds them until autovacuum clears them, which is slower but still correct.
    """
    memory = Memory.objects.filter(slug=slug).first()
    if memory is None:
        return
    drop_hnsw_index()
    try:
        with _unhurried(), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMPORARY TABLE bench_gone ON COMMIT DROP AS SELECT id FROM knowledge_fact"
                " WHERE memory_id = %s AND source_id IS NOT NULL",
                [memory.pk],
            )
            bulk = "SELECT id FROM bench_gone"
            cursor.execute(f"DELETE FROM knowledge_fact_subjects WHERE fact_id IN ({bulk})")
            # What intake taught has a source too, and observations citing it.
            cursor.execute(f"DELETE FROM knowledge_observation WHERE fact_id IN ({bulk})")
            cursor.execute(f"DELETE FROM knowledge_fact WHERE id IN ({bulk})")
            # The citations after their facts (the foreign key is checked at commit), and
            # without the triggers that keep citing facts' label sets in step: with the facts
            # gone there is nothing to keep (before the facts, every fact was rewritten to be
            # deleted a moment later: minutes at 100k; with the triggers, the statement's
            # million-row transition table alone took more than ten minutes at 1M).
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(f"DELETE FROM knowledge_citation WHERE fact_id IN ({bulk})")
            cursor.execute("SET LOCAL session_replication_role = origin")
            memory.delete()
        if not connection.in_atomic_block:  # VACUUM cannot run in a transaction (a test's)
            with _unhurried(), connection.cursor() as cursor:
                # Every table it wrote, analysed too: with the statistics of the rows just
                # deleted, the bulk adds measured right after the import benchmark's households
                # went took 941 statements/s, and 1,376 analysed.
                cursor.execute(f"VACUUM ANALYZE {LOADED}, {DELETED}")
                # Vacuumed index pages are only reused, never given back: after a 1M household
                # the next run's 10k one was measured in 1.6 GB of near-empty indexes. What is
                # left is rebuilt (the HNSW index, dropped now, after it), seconds at 100k.
                cursor.execute("REINDEX TABLE knowledge_fact")
    finally:
        ensure_hnsw_index()


# Households several benchmarks read, made once per run -------------------------------------

_SHARED: dict[int, Household] = {}
LEFT_OVER = r"^bench-([a-z]+-)?[0-9]+[km]$"  # the synthetic households' slugs: bench-100k, …


def delete_left_over() -> None:
    """Delete the households a killed run (or a session by hand) left: they would share the
    facts' table and its indexes with this run's. A 10k household beside a 100k one was
    measured at 21.9 ms, and at 15.5 alone in the next run; the real sentences' recall@10 at
    0.970 beside a 100k household, 0.998 alone. The run's first household does it, and recall
    before its real sentences."""
    for slug in Memory.objects.filter(slug__regex=LEFT_OVER).values_list("slug", flat=True):
        delete_household(slug)


def shared_household(count: int) -> Household:
    """The synthetic household of ``count`` facts (seed 1) that recall, the Knowledge tab and
    intake all read, generated on first use and kept for the rest of the run: loading 100k
    facts and building their HNSW index takes about a minute, and each benchmark made its own.
    Whoever writes into it (intake) runs after those that only read it (settings order).
    ``release_shared`` deletes them at the end of the run."""
    if not _SHARED:
        delete_left_over()
    if count not in _SHARED:
        slug = f"bench-{_size(count).lower()}"
        delete_household(slug)
        _SHARED[count] = generate_household(slug=slug, count=count)
    return _SHARED[count]


def release_shared(*counts: int) -> None:
    """Delete the shared households of ``counts`` facts, or every one (the end of ``make
    bench``). Safe to run twice."""
    for count in counts or list(_SHARED):
        household = _SHARED.pop(count, None)
        if household is not None:
            delete_household(household.memory.slug)


# Measuring ------------------------------------------------------------------------------------


def _ms(seconds: list[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int = 10) -> np.ndarray:
    """Row indices of the k rows nearest ``query`` by cosine (unit rows: the dot product)."""
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def _timed[T](work: Callable[..., T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


@dataclass
class Questions:
    texts: list[str]
    subjects: list[list[Subject]]  # the subject in play, for half of them
    vectors: np.ndarray  # synthetic, for recall
    subject_vectors: np.ndarray  # synthetic, about the big subject


def questions(household: Household, seed: int) -> Questions:
    """QUERIES statements drawn like the facts: half about a subject (weighted as the facts
    are) with it in play, half about none; plus QUERIES about the big subject."""
    sampler = Sampler(household.subjects, subject_shares(len(household.subjects)), seed)
    about = np.random.default_rng(seed).choice(
        len(household.subjects), size=QUERIES, p=np.array(sampler.shares) / sum(sampler.shares)
    )
    about[1::2] = -1
    texts, vectors = sampler.sample(about, np.random.default_rng(seed + 1))
    in_play = [[household.subjects[i]] if i >= 0 else [] for i in about.tolist()]
    _, subject_vectors = sampler.sample(
        np.zeros(QUERIES, dtype=np.int64), np.random.default_rng(seed + 2)
    )
    return Questions(texts, in_play, vectors, subject_vectors)


@dataclass
class Figures:
    count: int
    load_seconds: float
    index_seconds: float
    table_bytes: int
    hnsw_bytes: int
    context: tuple[float, float]
    plain: tuple[float, float]  # plain_context, the reference, on the same questions
    again: tuple[float, float]  # context() of the same question asked again: its vector kept
    embedding: tuple[float, float]
    nearest: tuple[float, float]
    exact: tuple[float, float]
    recall: float
    subject_size: int
    subject_recall: float
    subject_nearest: tuple[float, float]
    subject_exact: tuple[float, float]
    hnsw_subject_recall: float
    hnsw_subject_nearest: tuple[float, float]
    brainmem: tuple[float, float] | None = None  # its context(), same texts and questions
    brainmem_why_not: str = ""
    # The one ranking's other surfaces, each with a question new to the process, and the floor
    # beneath them: the question's embedding, one HNSW query and reading its rows, in a row.
    retrieve: tuple[float, float] = (0.0, 0.0)
    ask: tuple[float, float] = (0.0, 0.0)
    floor: tuple[float, float] = (0.0, 0.0)
    brainmem_retrieve: tuple[float, float] | None = None  # its retrieve(goal, k=3)


def forget_questions() -> None:
    """The next question is new to the process: no vector kept from an earlier call."""
    with embedding._questions_lock:
        embedding._questions.clear()


def floor(memory: Memory, embedder, question: str) -> list:
    """What any recall must do, in a row: embed the question (new to the process), one HNSW
    query for its ten nearest facts, and read their rows."""
    vector = embed_question(embedder, question)
    near = [pk for pk, _ in search.nearest(memory, vector, limit=10)]
    return list(
        Fact.objects.as_system("the floor beneath recall, timed")
        .filter(pk__in=near)
        .values_list("pk", "text", "valence", "confidence", "support")
    )


def offline_answer(memory: Memory, question: str) -> ask.Exchange:
    """The ask bar's answer without a model (a model's call is not brain's time)."""
    with override_settings(ANTHROPIC_API_KEY=""):
        return ask.answer(memory=memory, question=question, reader=SYSTEM)


BRAINMEM_RETRIEVE_AT_MOST = 10_000  # its retrieve is a scan of every vector: 10k only


def measure(household: Household, *, seed: int = 7, brainmem=None) -> Figures:
    """Every path timed question by question, interleaved, so a burst of load elsewhere hits
    them alike; ``brainmem``: a ``Brainmem`` loaded with the same facts, timed in the same
    loop."""
    memory = household.memory
    asked = questions(household, seed)
    embedder = get_embedder()
    pairs = list(zip(asked.texts, asked.subjects, strict=True))
    for text, subjects in pairs[:10]:  # warm up: caches, the model, the connection
        retrieval.context(memory=memory, question=text, subjects=subjects, reader=SYSTEM)
        retrieval.plain_context(memory=memory, question=text, subjects=subjects, reader=SYSTEM)
        retrieval.retrieve(memory=memory, question=text, reader=SYSTEM)
        offline_answer(memory, text)
        floor(memory, embedder, text)
    theirs = []
    if brainmem is not None:
        for text in asked.texts[:5]:
            brainmem.context(text)
            brainmem.retrieve(text)
    context_times, plain_times, again_times = [], [], []
    retrieve_times, ask_times, floor_times, theirs_retrieve = [], [], [], []
    embedding_times, exact_times, nearest_times = [], [], []
    for text, subjects in pairs:
        # Each question is new to the process: its vector is not kept from an earlier call.
        context_times.append(
            _timed(
                lambda t=text, s=subjects: retrieval.context(
                    memory=memory, question=t, subjects=s, reader=SYSTEM
                )
            )[0]
        )
        plain_times.append(
            _timed(
                lambda t=text, s=subjects: retrieval.plain_context(
                    memory=memory, question=t, subjects=s, reader=SYSTEM
                )
            )[0]
        )
        # Asked again, as a session's hooks ask: everything but embedding the question.
        again_times.append(
            _timed(
                lambda t=text, s=subjects: retrieval.context(
                    memory=memory, question=t, subjects=s, reader=SYSTEM
                )
            )[0]
        )
        if brainmem is not None:
            theirs.append(brainmem.context(text))
            if len(household.fact_ids) <= BRAINMEM_RETRIEVE_AT_MOST:
                theirs_retrieve.append(brainmem.retrieve(text))
        forget_questions()
        retrieve_times.append(
            _timed(lambda t=text: retrieval.retrieve(memory=memory, question=t, reader=SYSTEM))[0]
        )
        forget_questions()
        ask_times.append(_timed(lambda t=text: offline_answer(memory, t))[0])
        floor_times.append(_timed(lambda t=text: floor(memory, embedder, t))[0])
        seconds, vector = _timed(lambda t=text: embed_question(embedder, t))
        embedding_times.append(seconds)
        query = np.array(vector, dtype=np.float32)
        exact_times.append(_timed(lambda q=query: exact_top(household.vectors, q))[0])
        nearest_times.append(
            _timed(lambda q=query: search.nearest(memory, q.tolist(), limit=10))[0]
        )
    recall, subject = vector_recall(household, asked)
    return Figures(
        count=len(household.fact_ids),
        load_seconds=household.load_seconds,
        index_seconds=household.index_seconds,
        table_bytes=household.table_bytes,
        hnsw_bytes=household.hnsw_bytes,
        context=_ms(context_times),
        plain=_ms(plain_times),
        again=_ms(again_times),
        embedding=_ms(embedding_times),
        nearest=_ms(nearest_times),
        exact=_ms(exact_times),
        recall=recall,
        brainmem=_ms(theirs) if theirs else None,
        retrieve=_ms(retrieve_times),
        ask=_ms(ask_times),
        floor=_ms(floor_times),
        brainmem_retrieve=_ms(theirs_retrieve) if theirs_retrieve else None,
        **subject,
    )


def vector_recall(household: Household, asked: Questions) -> tuple[float, dict]:
    """recall@10 of ``search.nearest`` against the exact numpy top-10: over the memory for
    ``asked.vectors``, over the big subject's rows (planned, and forced through HNSW) for
    ``asked.subject_vectors``."""
    memory = household.memory
    found, subject_found, hnsw_found = [], [], []
    subject_times, subject_exact_times, hnsw_times = [], [], []
    rows = household.rows_about(household.big_subject)
    subject_vectors = household.vectors[rows]
    big = household.big_subject.pk
    for query in asked.vectors:
        truth = set(household.fact_ids[exact_top(household.vectors, query)].tolist())
        got = {pk for pk, _ in search.nearest(memory, query.tolist(), limit=10)}
        found.append(len(truth & got) / 10)
    for query in asked.subject_vectors:
        seconds, top = _timed(lambda q=query: exact_top(subject_vectors, q))
        subject_exact_times.append(seconds)
        truth = set(household.fact_ids[rows[top]].tolist())
        seconds, nearest = _timed(
            lambda q=query: search.nearest(memory, q.tolist(), limit=10, subject_id=big)
        )
        subject_times.append(seconds)
        subject_found.append(len(truth & {pk for pk, _ in nearest}) / 10)
        with mock.patch.object(search, "EXACT_SCAN_LIMIT", -1):  # what the planner avoids
            seconds, nearest = _timed(
                lambda q=query: search.nearest(memory, q.tolist(), limit=10, subject_id=big)
            )
        hnsw_times.append(seconds)
        hnsw_found.append(len(truth & {pk for pk, _ in nearest}) / 10)
    return statistics.fmean(found), {
        "subject_size": len(rows),
        "subject_recall": statistics.fmean(subject_found),
        "subject_nearest": _ms(subject_times),
        "subject_exact": _ms(subject_exact_times),
        "hnsw_subject_recall": statistics.fmean(hnsw_found),
        "hnsw_subject_nearest": _ms(hnsw_times),
    }


def _size(count: int) -> str:
    return f"{count // 1_000_000}M" if count >= 1_000_000 else f"{count // 1000}k"


def sizes(spec: str | None = None) -> list[int]:
    """The sizes to measure: ``BRAIN_BENCH_SIZES`` (``make bench SIZES=1m``), as "10k,100k"."""
    spec = spec if spec is not None else os.environ.get("BRAIN_BENCH_SIZES", "")
    units = {"k": 1_000, "m": 1_000_000}
    chosen = [
        int(float(word[:-1]) * units[word[-1]]) if word[-1] in units else int(word)
        for word in spec.lower().replace(" ", "").split(",")
        if word
    ]
    return chosen or list(SIZES)


class Brainmem:
    """brainmem 0.3.0 in its own venv under var/ (``bench.brainmem.brainmem_cli``, never a
    dependency of brain), its store loaded with the household's live texts, confidences and
    support, serving ``Memory.context(goal, token_budget=600)`` over a pipe and timing each
    call inside its own process, so the pipe is not counted."""

    SERVER = (
        "import json, sys, time\n"
        "import brainmem\n"
        "memory = brainmem.Memory(sys.argv[1])\n"
        "for line in sys.stdin:\n"
        "    op, goal = json.loads(line)\n"
        "    started = time.perf_counter()\n"
        "    if op == 'retrieve':\n"
        "        memory.retrieve(goal, k=3)\n"
        "    else:\n"
        "        memory.context(goal, token_budget=600)\n"
        "    print(time.perf_counter() - started, flush=True)\n"
    )

    def __init__(self, memory: Memory, folder: str):
        # brainmem's venv helper and loader live one layer up, in the hook benchmark; a
        # benchmark wired through settings may call them.
        from bench import brainmem

        self.process: subprocess.Popen[str] | None = None
        cli, self.why_not = brainmem.brainmem_cli()
        if cli is None:
            return
        rows = list(
            Fact.objects.as_system("the benchmark reads its household")
            .for_memory(memory)
            .live()
            .values_list("text", "confidence", "support")
        )
        store = brainmem.load(cli, rows, Path(folder))
        self.process = subprocess.Popen(
            [str(cli.parent / "python"), "-c", self.SERVER, str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def context(self, goal: str) -> float:
        return self._timed("context", goal)

    def retrieve(self, goal: str) -> float:
        return self._timed("retrieve", goal)

    def _timed(self, op: str, goal: str) -> float:
        # Timed only once the server is running, its pipes opened by __init__.
        assert self.process is not None
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([op, goal]) + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None  # opened with stdin=PIPE
            self.process.stdin.close()
            self.process.wait(timeout=30)


def _measured(count: int, *, with_brainmem: bool) -> Figures:
    household = shared_household(count)
    with tempfile.TemporaryDirectory(prefix="brain-bench-recall-") as folder:
        theirs = Brainmem(household.memory, folder) if with_brainmem else None
        try:
            figures = measure(household, brainmem=theirs if theirs and theirs.process else None)
        finally:
            if theirs is not None:
                theirs.close()
        if theirs is not None:
            figures.brainmem_why_not = theirs.why_not
    return figures


def _yes(met: bool) -> str:
    return "met" if met else "**not met**"


BRAINMEM_SIZES = (10_000, 100_000)  # the sizes the issue compares at
CONTEXT_TARGETS_MS = {10_000: 5, 100_000: 10, 1_000_000: 25}
BRAINMEM_TARGETS = {10_000: 10, 100_000: 50}  # times faster than brainmem's context()
RECALL_TARGET = 0.95


def recall_at_scale() -> str:
    """context() and the vector path at BRAIN_BENCH_SIZES (10k and 100k by default), beside
    brainmem's context() at 10k and 100k, and recall@10 on real MiniLM vectors of real
    sentences at 10k."""
    load_before = os.getloadavg()[0]
    # Real sentences first, alone in the table: beside the shared 100k household, HNSW walks
    # that memory's rows too on its way to these (recall@10 0.932 against 0.981 alone), and
    # beside one an earlier run left.
    delete_left_over()
    real = real_sentence_recall(REAL_SENTENCES)
    runs = []
    for count in sizes():
        runs.append(_measured(count, with_brainmem=count in BRAINMEM_SIZES))
        if count not in SHARED_SIZES:  # no other benchmark reads it: out of the next one's way
            release_shared(count)
    note = _load_note(load_before) + (
        "The numpy baseline runs BLAS on one thread, as every brain process does "
        "(brain/__init__.py).\n\n"
    )
    section = _recall_markdown(runs, real, note, get_embedder().name)
    from django.conf import settings

    # The file as it was before `make bench` began rewriting it (the bench command's copy).
    before = os.environ.get("BRAIN_BENCH_PREVIOUS")
    kept = sized_section(Path(before or Path(settings.BASE_DIR) / "docs" / "BENCHMARKS.md"))
    return section + ("\n" + kept if kept else "")


def _load_note(load_before: float) -> str:
    cores, load_after = os.cpu_count() or 1, os.getloadavg()[0]
    busy = (
        "above the core count, so other work was slowing every figure; "
        if max(load_before, load_after) > cores
        else ""
    )
    return (
        f"Load average (1 min) on this machine's {cores} cores: {load_before:.1f} when this "
        f"benchmark started, {load_after:.1f} when it ended: {busy}the paths are timed "
        "interleaved, so each ratio compares like with like. "
    )


def _recall_markdown(runs: list[Figures], real: dict | None, note: str, embedder: str) -> str:
    hnsw = _hnsw_index()  # as the model defines it: the text says what was built
    lines = [
        "## Recall at scale: context() and the vector path against an exact scan\n",
        "One synthetic household per size, in a memory of its own: 40 subjects (the house, 20 "
        f"rooms, 7 people, 12 devices); the kitchen holds {BIG_SUBJECT_SHARE:.0%} of the facts, "
        "the other 39 from 1.8% down to 0.5%, the rest are about no subject. Texts come from "
        "household templates. Vectors are synthetic (384-d, unit length, clustered by template, "
        "subject and filled-in values; the real embedder would take hours at 1M). Loaded with "
        f"COPY, the HNSW index (m={hnsw.m}, ef_construction={hnsw.ef_construction}, cosine) "
        "built afterwards, then "
        "VACUUM ANALYZE, and the facts' table and the indexes recall reads are read into "
        "shared buffers (`pg_prewarm`), as a server that has been answering questions holds "
        f"them (`bench.knowledge.settle`). {QUERIES} questions per size, half with a subject "
        "in play, each new to the process (no question vector kept from before); context() "
        "embeds each with "
        f"`{embedder}`. Baselines in the same run, question by question: `plain_context` (the "
        "plain path the fast one replaced, which gives the same block), an exact numpy top-10 "
        "(float32 dot product over every live vector, held in memory) and brainmem 0.3.0's "
        "`Memory.context(goal, token_budget=600)` from PyPI in its own venv under var/, its "
        "store loaded with the same live texts, confidences and support (at 10k and 100k; "
        'timed inside its process). A ratio above 1 means ours is faster. "Asked again" is '
        "context() of the same question right after, its vector kept (as a session's hooks ask "
        "the same goal): everything but embedding the question.\n",
        "| live facts | context() p50 / p95 | plain path p50 / p95 | plain ÷ context() | "
        "question embedding p50 | asked again (vector kept) p50 | exact numpy p50 / p95 | "
        "brainmem context() p50 / p95 | brainmem ÷ context() |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in runs:
        theirs = (
            f"{f.brainmem[0]:.1f} / {f.brainmem[1]:.1f} ms | {f.brainmem[0] / f.context[0]:.1f}×"
            if f.brainmem
            else "— | —"
        )
        lines.append(
            f"| {_size(f.count)} | {f.context[0]:.1f} / {f.context[1]:.1f} ms | "
            f"{f.plain[0]:.1f} / {f.plain[1]:.1f} ms | {f.plain[0] / f.context[0]:.1f}× | "
            f"{f.embedding[0]:.1f} ms | {f.again[0]:.1f} ms | "
            f"{f.exact[0]:.2f} / {f.exact[1]:.2f} ms | {theirs} |"
        )
    why_not = {f.brainmem_why_not for f in runs if f.brainmem_why_not}
    if why_not:
        lines.append(f"\nbrainmem was not measured: {'; '.join(sorted(why_not))}.")
    lines += ["", *_surfaces_markdown(runs)]
    lines += [
        "",
        "The vector path alone, `search.nearest(limit=10)`, for the same question vectors, and "
        "recall@10 against the exact numpy top-10 over synthetic questions drawn like the facts "
        f"({QUERIES} each). For the kitchen the truth is the exact top-10 over its rows only; "
        '"forced HNSW" runs the kitchen through the HNSW path (as if it held more than '
        "`EXACT_SCAN_LIMIT` facts): what planning by selectivity avoids.\n",
        "| live facts | load (COPY) | HNSW build | facts table and indexes | HNSW index | "
        "nearest p50 / p95 | nearest vs exact | "
        "recall@10 | kitchen rows | kitchen recall@10 (planned) | kitchen p50 / p95 | kitchen "
        "exact numpy p50 | kitchen recall@10, forced HNSW | forced HNSW p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in runs:
        lines.append(
            f"| {_size(f.count)} | {f.load_seconds:.1f} s | {f.index_seconds:.1f} s | "
            f"{f.table_bytes / 2**20:,.0f} MiB | {f.hnsw_bytes / 2**20:,.0f} MiB | "
            f"{f.nearest[0]:.1f} / {f.nearest[1]:.1f} ms | {f.exact[0] / f.nearest[0]:.2f}× | "
            f"{f.recall:.3f} | {f.subject_size:,} | {f.subject_recall:.3f} | "
            f"{f.subject_nearest[0]:.1f} / {f.subject_nearest[1]:.1f} ms | "
            f"{f.subject_exact[0]:.2f} ms | {f.hnsw_subject_recall:.3f} | "
            f"{f.hnsw_subject_nearest[0]:.1f} ms |"
        )
    if real:
        lines += [
            "",
            f"Real sentences: {real['count']:,} English sentences from the docstrings and "
            "comments of the Python standard library and the packages in brain's venv (the "
            "same on every install of these requirements), embedded with "
            f"`{real['embedder']}` ({real['embed_seconds']:.0f} s; kept under var/ after the "
            "first run), loaded as a household "
            f"(the kitchen holds {real['subject_size']:,} of them), {real['questions']} other "
            "sentences as questions: recall@10 of `search.nearest` against the exact top-10 "
            "of the same vectors. Questions are embedded by the question path "
            "(`knowledge.question_model`: the same weights in 8-bit arithmetic), facts by the "
            "float model: the last two columns compare the question path's vectors of those "
            "sentences with the float model's (the share of the float vector's exact top-10 "
            "the question path's finds, and their least cosine).\n",
            "| live facts | recall@10 | kitchen recall@10 | nearest p50 | question path's "
            "top-10 agreement | least cosine |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {_size(real['count'])} | {real['recall']:.3f} | {real['subject_recall']:.3f} | "
            f"{real['nearest']:.1f} ms | {real['question_agreement']:.3f} | "
            f"{real['question_cosine']:.4f} |",
        ]
    lines.append("")
    lines.append(note + "\n\n" + _targets(runs, real))
    return "\n".join(lines)


FLOOR_TARGET = 1.5  # context() p50 at most this many times the floor's
BRAINMEM_KEPT = {10_000: 2.5, 100_000: 25}  # times brainmem's context(), at least


def _surfaces_markdown(runs: list[Figures]) -> list[str]:
    """The one ranking's surfaces beside the floor beneath them, in the same loop."""
    lines = [
        "The one ranking's surfaces, each asked the same questions new to the process "
        "(no vector kept), in the same loop: `retrieve(k=3)` (MCP's `memory_search`, the agent "
        "API), the ask bar's answer offline (`memory.ask.answer`: the block, its facts and the "
        "passages of notes), beside the floor any recall stands on: the question's embedding, "
        "one HNSW query for its ten nearest facts and reading their rows, one after the other. "
        "brainmem's `Memory.retrieve(goal, k=3)` is timed inside its process at "
        f"{_size(BRAINMEM_RETRIEVE_AT_MOST)} (a scan of every vector: at 100k as slow as its "
        "context()).\n",
        "| live facts | floor p50 / p95 | context() p50 | context() ÷ floor | retrieve() p50 / "
        "p95 | retrieve() ÷ context() | ask bar p50 / p95 | ask bar ÷ context() | brainmem "
        "retrieve() p50 | brainmem retrieve ÷ ours |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in runs:
        theirs = (
            f"{f.brainmem_retrieve[0]:.1f} ms | {f.brainmem_retrieve[0] / f.retrieve[0]:.1f}×"
            if f.brainmem_retrieve
            else "— | —"
        )
        lines.append(
            f"| {_size(f.count)} | {f.floor[0]:.1f} / {f.floor[1]:.1f} ms | "
            f"{f.context[0]:.1f} ms | {f.context[0] / f.floor[0]:.2f}× | "
            f"{f.retrieve[0]:.1f} / {f.retrieve[1]:.1f} ms | "
            f"{f.retrieve[0] / f.context[0]:.2f}× | {f.ask[0]:.1f} / {f.ask[1]:.1f} ms | "
            f"{f.ask[0] / f.context[0]:.2f}× | {theirs} |"
        )
    return lines


def _surfaces_targets(runs: list[Figures]) -> list[str]:
    lines = []
    for f in runs:
        over = f.context[0] / f.floor[0]
        lines.append(
            f"- {_size(f.count)}: context() p50 at most {FLOOR_TARGET}× the floor — "
            f"{over:.2f}× ({f.context[0]:.1f} against {f.floor[0]:.1f} ms), "
            f"{_yes(over <= FLOOR_TARGET)}."
        )
        lines.append(
            f"- {_size(f.count)}: retrieve() no slower than context() — {f.retrieve[0]:.1f} "
            f"against {f.context[0]:.1f} ms p50, {_yes(f.retrieve[0] <= f.context[0])}."
        )
        kept = BRAINMEM_KEPT.get(f.count)
        if kept is not None and f.brainmem:
            got = f.brainmem[0] / f.context[0]
            lines.append(
                f"- {_size(f.count)}: brainmem's context() side by side kept, at least {kept}× "
                f"ours — {got:.1f}×, {_yes(got >= kept)}."
            )
    return lines


def _targets(runs: list[Figures], real: dict | None) -> str:
    lines = ["Targets:\n"]
    for f in runs:
        target = CONTEXT_TARGETS_MS.get(f.count)
        if target is not None:
            lines.append(
                f"- {_size(f.count)}: context() p50 under {target} ms — {f.context[0]:.1f} ms, "
                f"{_yes(f.context[0] < target)}."
            )
        worst = min(f.recall, f.subject_recall)
        lines.append(
            f"- {_size(f.count)}: recall@10 ≥ {RECALL_TARGET} (synthetic vectors) — "
            f"{f.recall:.3f} global, {f.subject_recall:.3f} for the kitchen, "
            f"{_yes(worst >= RECALL_TARGET)}."
        )
        ratio = BRAINMEM_TARGETS.get(f.count)
        if ratio is not None and f.brainmem:
            got = f.brainmem[0] / f.context[0]
            lines.append(
                f"- {_size(f.count)}: at least {ratio}× brainmem's context() — {got:.1f}×, "
                f"{_yes(got >= ratio)}."
            )
    lines += _surfaces_targets(runs)
    if real:
        worst = min(real["recall"], real["subject_recall"])
        lines.append(
            f"- {_size(real['count'])}, real MiniLM vectors: recall@10 ≥ {RECALL_TARGET} — "
            f"{real['recall']:.3f} global, {real['subject_recall']:.3f} for the kitchen, "
            f"{_yes(worst >= RECALL_TARGET)}."
        )
        lines.append(
            f"- {_size(real['count'])}, real sentences: the question path's vectors find the "
            f"float model's exact top-10 at least {RECALL_TARGET:.0%} of the time (the same bar "
            f"as the vector path) — {real['question_agreement']:.3f}, "
            f"{_yes(real['question_agreement'] >= RECALL_TARGET)}."
        )
    return "\n".join(lines) + "\n"


# Real sentences -------------------------------------------------------------------------------

REAL_SENTENCES = 10_000
_PROSE = re.compile(r"[A-Z][a-z]+(?: [A-Za-z,;'-]+){5,30}\.")


def real_sentences() -> list[str]:
    """English sentences from the docstrings and comments of the standard library and the
    installed packages, in a fixed shuffled order: about 15,000 with brain's requirements."""
    found: dict[str, None] = {}
    paths = sysconfig.get_paths()
    for root in (Path(paths["stdlib"]), Path(paths["purelib"])):
        for path in sorted(root.rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            text = re.sub(r"[ \t]*\n[ \t#]*", " ", text)
            for piece in re.split(r"(?<=\.)\s+", text):
                piece = piece.strip()
                if 40 <= len(piece) <= 200 and _PROSE.fullmatch(piece):
                    found.setdefault(piece, None)
    sentences = list(found)
    random.Random(REAL_SEED).shuffle(sentences)
    return sentences


REAL_SEED = 12


def _embedded(embedder, texts: list[str]) -> np.ndarray:
    """The vectors of ``texts``, kept under var/ after the first run (embedding 10,000
    sentences takes about a minute on two cores; the sentences and model do not change)."""
    from brain import embedded

    digest = hashlib.blake2b("\n".join(texts).encode(), digest_size=12).hexdigest()
    path = embedded.VAR_DIR / "bench-cache" / f"{embedder.name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.array(embedder.embed(texts), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def real_sentence_recall(count: int) -> dict | None:
    """recall@10 of the vector path over ``count`` real sentences embedded with MiniLM (None
    when MiniLM is not installed or there are too few sentences)."""
    embedder = get_embedder("minilm")
    sentences = real_sentences()
    if embedder.name != "minilm-int8-v1" or len(sentences) < count + QUERIES:
        return None
    texts, asked = sentences[:count], sentences[count : count + QUERIES]
    started = time.perf_counter()
    vectors = _embedded(embedder, texts + asked)
    embed_seconds = time.perf_counter() - started
    agreement, lowest = question_agreement(embedder, asked, vectors[count:], vectors[:count])
    slug = f"bench-real-{_size(count).lower()}"
    delete_household(slug)
    try:
        with override_settings(BRAIN_EMBEDDER="minilm"):
            household = generate_household(
                slug=slug, count=count, seed=REAL_SEED, given=(texts, vectors[:count])
            )
            question_vectors = vectors[count:]
            found = Questions(asked, [[]] * QUERIES, question_vectors, question_vectors)
            recall, subject = vector_recall(household, found)
            times = [
                _timed(lambda q=q: search.nearest(household.memory, q.tolist(), limit=10))[0]
                for q in question_vectors
            ]
    finally:
        delete_household(slug)
    return {
        "count": count,
        "questions": QUERIES,
        "embedder": embedder.name,
        "embed_seconds": embed_seconds,
        "recall": recall,
        "subject_recall": subject["subject_recall"],
        "subject_size": subject["subject_size"],
        "nearest": statistics.median(times) * 1000,
        "question_agreement": agreement,
        "question_cosine": lowest,
    }


def question_agreement(
    embedder, asked: list[str], exact: np.ndarray, stored: np.ndarray
) -> tuple[float, float]:
    """How alike the question path's vectors of ``asked`` (``embed_question``: 8-bit for
    MiniLM) are to ``exact`` (the float model's): the share of the exact top-10 over ``stored``
    that the question path's vector finds too, and the least cosine between the two vectors."""
    quick = np.array([embed_question(embedder, text) for text in asked], dtype=np.float32)
    shared = [
        len(set(exact_top(stored, a).tolist()) & set(exact_top(stored, b).tolist())) / 10
        for a, b in zip(exact, quick, strict=True)
    ]
    return statistics.fmean(shared), float((exact * quick).sum(axis=1).min())


def intake_through_the_gate() -> str:
    """Teaching INTAKE statements through memory.actions.learn into a memory of INTAKE_FACTS."""
    # The full write path lives one layer up; a benchmark wired through settings may call it.
    from memory.actions import learn

    load_before = os.getloadavg()[0]
    # The hash embedder throughout, vectors of the household labelled with its name included.
    # It writes into the shared household, so it runs after those that only read it; the
    # household goes with it.
    with override_settings(BRAIN_EMBEDDER="hash"):
        try:
            gate_seconds, plain_seconds, verdicts = _intake(learn, INTAKE_FACTS)
        finally:
            release_shared(INTAKE_FACTS)
    gate_rate, plain_rate = INTAKE / gate_seconds, INTAKE / plain_seconds
    load = _load_note(load_before)
    mix = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
    return (
        "## Intake through the full gate\n\n"
        f"{INTAKE} new household statements (allergies, where spare things are kept, "
        "purchases; none made by the household's templates) taught one by one with "
        "`memory.actions.learn` into a "
        f"memory of {_size(INTAKE_FACTS)} live synthetic facts (hash embedder): secret "
        "filter, subject resolution, embedding, the gate's neighbours (same words, full "
        "text, nearest vectors) "
        "and verdict, the fact row with its subjects and the inbox item. Baseline: "
        f"{INTAKE} plain `Fact.objects.create` rows (vector computed beforehand) in the same "
        "memory (text normalised beforehand too).\n\n"
        "| path | statements/s | per statement | ratio to baseline |\n|---|---:|---:|---:|\n"
        f"| learn() through the gate | {gate_rate:.0f} | {1000 / gate_rate:.1f} ms | "
        f"{plain_rate / gate_rate:.1f}× slower |\n"
        f"| plain Fact.objects.create | {plain_rate:.0f} | {1000 / plain_rate:.1f} ms | 1.0× |\n\n"
        f"The gate's verdicts: {mix}.\n\n{load}\n"
    )


def new_statements(count: int, *, seed: int) -> list[str]:
    """``count`` distinct statements of things the synthetic household has not been told."""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    while len(found) < count:
        template = rng.choice(NEW_FACTS)
        found[template.format(
            person=rng.choice(PEOPLE), room=rng.choice(ROOMS), thing=rng.choice(THINGS),
            month=rng.choice(SLOTS["month"]), season=rng.choice(SLOTS["season"]),
            n=rng.randint(2, 90),
        )] = None  # fmt: skip
    return list(found)


def _intake(learn, count: int) -> tuple[float, float, dict[str, int]]:
    household = shared_household(count)
    memory = household.memory
    texts = new_statements(2 * INTAKE, seed=11)
    taught, plain = texts[:INTAKE], texts[INTAKE:]
    embedder = get_embedder()
    vectors = [embedder.embed_one(text) for text in plain]
    normalised = [statements.normalise(text) for text in plain]
    learn(
        Statement.typed(memory=memory, text="The kettle is in the kitchen.", origin="typed")
    )  # warm up
    verdicts: dict[str, int] = {}
    gate_seconds = plain_seconds = 0.0
    # Interleaved, so a burst of load elsewhere hits both paths alike.
    for text, other, normalized, vector in zip(taught, plain, normalised, vectors, strict=True):
        seconds, learned = _timed(
            lambda t=text: learn(Statement.typed(memory=memory, text=t, origin="typed"))
        )
        gate_seconds += seconds
        verdicts[learned.verdict] = verdicts.get(learned.verdict, 0) + 1
        plain_seconds += _timed(
            lambda t=other, n=normalized, v=vector: Fact.objects.create(
                memory=memory,
                text=t,
                normalized=n,
                channel=Fact.Channel.TYPED,
                embedding=v,
                embedder=embedder.name,
            )
        )[0]
    return gate_seconds, plain_seconds, verdicts


# `make bench SIZES=1m`: one size, measured on its own -------------------------------------

SIZED_HEADING = "## Recall at scale, measured on its own (`make bench SIZES=…`)"


def sized_section(path: Path) -> str:
    """The section ``make bench SIZES=…`` last wrote into ``path``, or ""."""
    if not path.exists():
        return ""
    kept = [part for part in sections.split(path.read_text()) if part.startswith(SIZED_HEADING)]
    return kept[0] if kept else ""


def recall_at_sizes(spec: str, path: Path) -> str:
    """Measure recall at scale at ``spec`` (e.g. "1m") and put the section into ``path`` in
    place of the one an earlier run wrote (the default `make bench` carries it over)."""
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    try:
        runs = [_measured(count, with_brainmem=False) for count in sizes(spec)]
    finally:
        release_shared()
    note = _load_note(load_before)
    body = _recall_markdown(runs, None, note, get_embedder().name)
    body = body.split("\n", 1)[1]  # the heading is this section's own
    when = timezone.now().strftime("%Y-%m-%d %H:%M")
    section = (
        f"{SIZED_HEADING}\n\nMeasured {when} UTC with `make bench SIZES={spec}` in "
        f"{(time.perf_counter() - started) / 60:.0f} min (the household generated, loaded and "
        "indexed, then measured as in the section above).\n" + body
    )
    parts = sections.split(path.read_text()) if path.exists() else ["# Benchmarks\n\n"]
    parts = [part for part in parts if not part.startswith(SIZED_HEADING)]
    recall = next(
        (index for index, part in enumerate(parts) if part.startswith("## Recall at scale")),
        len(parts) - 1,
    )
    parts.insert(recall + 1, section.rstrip("\n") + "\n\n")
    path.write_text("".join(parts))
    return section


def main() -> None:
    """`make bench SIZES=1m`: ``manage.py shell -c "from bench.knowledge import main; main()"``
    with BRAIN_BENCH_SIZES set."""
    from django.conf import settings

    output = Path(settings.BASE_DIR) / "docs" / "BENCHMARKS.md"
    print(recall_at_sizes(os.environ.get("BRAIN_BENCH_SIZES") or "1m", output))
