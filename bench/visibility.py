"""The read rules at scale (one of `make bench`'s BENCHMARKS): reading what a person may
read, against the same query with no rule, in the same run.

A memory of its own holds FACTS facts, each citing CITED passages drawn from FACTS × 3
passages over LABELS labels (each passage one or two of them); ROLES roles grant two labels
each, and the reader holds READER_ROLES of them (10 of the 12 labels: they read most passages,
and a fact only when they read all three it cites). The baseline is the same reader with the rule
taken out (``readable_facts`` patched to read everything), so what differs is the rule alone.

Timed, each ROUNDS times, interleaved so load on the machine hits both alike:

- the facts list's first page (the 50 newest live facts the reader may read);
- how many live facts the reader may read (a count walks them all);
- ``retrieval.context()`` for a question, with the reader against without.

Targets (the issue's): the first two p50 under 20 ms, and context() with the rule at most 1.3×
its time without. ``BRAIN_BENCH_RULE_FACTS`` sets a smaller size while developing.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from unittest import mock

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from brain.db.copying import copy_create
from knowledge import retrieval, statements
from knowledge.models import (
    Citation,
    Fact,
    Label,
    LabelSet,
    Memory,
    Passage,
    PassageLabel,
    Role,
    Source,
)

FACTS = int(os.environ.get("BRAIN_BENCH_RULE_FACTS", "100000"))
CITED = 3
LABELS = 12
ROLES = 6
READER_ROLES = 5
ROUNDS = 40
SLUG = "bench-read-rules"
WORDS = ["kitchen", "boiler", "order", "invoice", "garden", "alarm", "heating", "contract"]
QUESTIONS = ["when is the boiler serviced", "who follows the invoice", "garden alarm order"]


def _ms(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1000, statistics.quantiles(seconds, n=20)[-1] * 1000


def generate(count: int = FACTS, seed: int = 3):
    """The memory, its labels, roles, passages and facts; returns (memory, reader)."""
    rng = random.Random(seed)
    memory = Memory.objects.create(slug=SLUG, name="Benchmark read rules", learning=False)
    labels = [
        Label.objects.create(memory=memory, name=f"Label {n}", meaning="") for n in range(LABELS)
    ]
    reader, _ = get_user_model().objects.get_or_create(username="bench-reader")
    for n in range(ROLES):
        role = Role.objects.create(memory=memory, name=f"Role {n}")
        role.labels.add(labels[2 * n], labels[2 * n + 1])
        if n < READER_ROLES:
            role.members.add(reader)
    with transaction.atomic():
        sources = Source.objects.bulk_create(
            Source(memory=memory, kind=Source.Kind.DOCUMENT, title=f"Document {n}")
            for n in range(count // 100 + 1)
        )
        passages = copy_create(
            [
                Passage(
                    memory=memory,
                    source=sources[n // 300],
                    ordinal=n % 300,
                    text=f"Passage {n}",
                    text_hash=str(n),
                )
                for n in range(count * CITED)
            ]
        )
        # Statistics first: labelling moves each passage to its label set by id, which a
        # planner that still thinks the table empty does by walking all 300k of them.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE knowledge_passage")
        copy_create(
            [
                PassageLabel(passage=passage, label=label)
                for passage in passages
                for label in {rng.choice(labels), rng.choice(labels)}
            ]
        )
        facts = []
        for n in range(count):
            text = f"The {rng.choice(WORDS)} {rng.choice(WORDS)} note number {n}."
            facts.append(
                Fact(
                    memory=memory,
                    text=text,
                    normalized=statements.normalise(text),
                    channel=Fact.Channel.IMPORT,
                    status=Fact.Status.FILED,
                )
            )
        copy_create(facts)
    # Statistics before citing: the triggers that keep each fact's label sets look passages
    # and citations up by their indexes, which a planner that thinks the tables empty skips.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_fact, knowledge_passage, knowledge_citation")
    with transaction.atomic():
        copy_create(
            [
                Citation(fact=fact, passage=passage)
                for fact in facts
                for passage in rng.sample(passages, CITED)
            ]
        )
    # Citing rewrote every fact once (the trigger sets its label sets): 100k dead rows and a
    # visibility map to rebuild, which autovacuum does within a minute or two on a running
    # server. Done here, so what is timed is the rule on a settled table, not the load's wake.
    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM (ANALYZE) knowledge_fact, knowledge_passage, knowledge_citation, "
            "knowledge_labelset"
        )
    return memory, reader


def delete() -> None:
    memory = Memory.objects.filter(slug=SLUG).first()
    if memory is None:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        # Everything of this memory goes, so the triggers that keep each citing fact's label
        # sets in step (rewriting every fact on its way out: past the statement ceiling at
        # 100k) have nothing to keep: off for this cleanup, with no ceiling.
        cursor.execute("SET LOCAL statement_timeout = 0")
        # Statistics first: right after a load, a planner that still takes the new labels for
        # none deleted them with a scan per row (20k facts: stopped after 9 minutes; 4.3 s with).
        cursor.execute("ANALYZE knowledge_passagelabel, knowledge_citation")
        cursor.execute("SET LOCAL session_replication_role = replica")
        # In SQL, not through Django's collector, which walked every relation of 100k facts and
        # 300k passages in 4,000 statements (32 s). Nothing else refers to them: ``generate``
        # writes only these tables and ``measure`` only reads (the replica role checks no
        # foreign key, so a row added elsewhere that referred to them would be left behind).
        facts, passages = Fact._meta.db_table, Passage._meta.db_table
        for sql in (
            f"DELETE FROM {Citation._meta.db_table} c USING {facts} f "
            "WHERE c.fact_id = f.id AND f.memory_id = %s",
            f"DELETE FROM {facts} WHERE memory_id = %s",
            f"DELETE FROM {PassageLabel._meta.db_table} l USING {passages} p "
            "WHERE l.passage_id = p.id AND p.memory_id = %s",
            f"DELETE FROM {passages} WHERE memory_id = %s",
        ):
            cursor.execute(sql, [memory.pk])
        labels = list(Label.objects.filter(memory=memory).values_list("pk", flat=True))
        LabelSet.objects.filter(labels__overlap=labels).delete()
        memory.delete()


def _timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _without_the_rule(facts, user):
    return facts


def measure(memory, reader, rounds: int = ROUNDS) -> dict[str, tuple[list[float], list[float]]]:
    """Each query as ``reader`` with the rule, and as the same reader with the rule taken out
    (everything else a reader brings, such as their own page in context(), stays)."""

    def ruled(work, ruled: bool):
        if ruled:
            return work()
        with mock.patch("knowledge.read_rule.readable_facts", _without_the_rule):
            return work()

    def first_page():
        facts = Fact.objects.for_memory(memory).live().readable_by(reader)
        return list(facts.order_by("-created_at", "-pk").values_list("pk", flat=True)[:50])

    def count():
        return Fact.objects.for_memory(memory).live().readable_by(reader).count()

    def context(question):
        return retrieval.context(memory=memory, question=question, reader=reader)

    timed: dict[str, tuple[list[float], list[float]]] = {
        "first page": ([], []),
        "count": ([], []),
        "context()": ([], []),
    }
    for _ in range(3):  # warm caches and the question vectors
        for question in QUESTIONS:
            ruled(lambda q=question: context(q), True), ruled(lambda q=question: context(q), False)
    for n in range(rounds):
        question = QUESTIONS[n % len(QUESTIONS)]
        for name, work in (
            ("first page", first_page),
            ("count", count),
            ("context()", lambda q=question: context(q)),
        ):
            # Each goes first every other round: the one after a count starts on the caches
            # and cores the count's parallel workers leave behind.
            for with_the_rule in (True, False) if n % 2 == 0 else (False, True):
                timed[name][0 if with_the_rule else 1].append(
                    _timed(lambda w=work, r=with_the_rule: ruled(w, r))
                )
    return timed


def read_rules() -> str:
    delete()
    try:
        memory, reader = generate()
        share = Fact.objects.for_memory(memory).readable_by(reader).count() / FACTS
        timed = measure(memory, reader)
    finally:
        delete()
    rows = []
    for name, (ruled, plain) in timed.items():
        (r50, r95), (p50, _) = _ms(ruled), _ms(plain)
        rows.append(f"| {name} | {r50:.1f} ms | {r95:.1f} ms | {p50:.1f} ms | {r50 / p50:.2f}× |")
    return (
        f"## Read rules: {FACTS // 1000}k facts citing {FACTS * CITED // 1000}k passages\n\n"
        f"A reader with {READER_ROLES} roles ({2 * READER_ROLES} of {LABELS} labels; they may "
        f"read {share:.0%} of the facts) against the same reader with the rule taken out, "
        f"{ROUNDS} rounds interleaved (knowledge/visibility.py).\n\n"
        "| query | p50 with the rule | p95 with the rule | p50 without | ratio |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Targets: the first page and the count under 20 ms at p50; context() with the rule at "
        "most 1.3× without.\n"
    )
