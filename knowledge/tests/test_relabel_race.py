"""Relabelling while facts are written: no fact is ever readable by a role that cannot read all
its passages, at any moment a concurrent reader looks (visibility.py, "Concurrency")."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from brain.db import inserting
from brain.db.retry import retry_transaction
from knowledge import actions, labelling, passages
from knowledge.models import Fact, Label, Memory, Passage, Role, Source

WRITES = 40
FLIPS = 30


def _team():
    memory = Memory.objects.create(slug="race", name="Race")
    sales = Label.objects.create(memory=memory, name="Sales", meaning="orders")
    hr = Label.objects.create(memory=memory, name="HR", meaning="pay")
    role = Role.objects.create(memory=memory, name="Sales")
    role.labels.add(sales)
    reader = get_user_model().objects.create_user(username="giulia")
    role.members.add(reader)
    source = Source.objects.create(memory=memory, kind=Source.Kind.DOCUMENT, title="Notes")
    shared, steady = passages.add(source, ["The order ships.", "Lunch at noon."], labels=[sales])
    return memory, sales, hr, reader, shared, steady


def _broken_now(memory, reader) -> list[int]:
    """In one snapshot: facts the reader may read that cite a passage the reader may not."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        facts = set(
            Fact.objects.for_memory(memory).readable_by(reader).values_list("pk", flat=True)
        )
        readable = set(
            Passage.objects.for_memory(memory).readable_by(reader).values_list("pk", flat=True)
        )
        cited = Fact.passages.through.objects.filter(fact_id__in=facts)
        return sorted({c.fact_id for c in cited if c.passage_id not in readable})


def _in_thread(work, failures: list) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test below
            failures.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_relabel_during_writes_never_lets_a_reader_read_a_fact_they_should_not(races):
    memory, sales, hr, reader, shared, steady = _team()
    # Some writes lose a lock race as they cite (with their observations) and are retried.
    lost = races(inserting, "insert_together", times=3)
    failures: list = []
    broken: list[int] = []
    done = threading.Event()

    @retry_transaction
    def write_one(n: int) -> None:
        with transaction.atomic():  # as every writer does: all of it, or on a lost race nothing
            actions.file_fact(
                memory=memory,
                text=f"Order {n} ships with lunch.",
                channel=Fact.Channel.API,
                kind=Fact.Kind.NOTE,
                cites=[shared, steady] if n % 2 else [shared],
            )

    def write() -> None:
        for n in range(WRITES):
            write_one(n)

    def relabel() -> None:
        for n in range(FLIPS):
            labelling.label_passages([shared], [hr] if n % 2 == 0 else [sales])
            time.sleep(0.002)
        labelling.label_passages([shared], [hr])

    def read() -> None:
        while not done.is_set():
            broken.extend(_broken_now(memory, reader))

    reading = _in_thread(read, failures)
    workers = [_in_thread(write, failures), _in_thread(relabel, failures)]
    for worker in workers:
        worker.join(timeout=120)
    done.set()
    reading.join(timeout=30)

    assert failures == [] and broken == []
    assert len(lost) > WRITES  # the lost races happened, and were written again
    assert Fact.objects.for_memory(memory).count() == WRITES
    # In the end "The order ships." is HR: Giulia reads none of the facts that cite it.
    assert not Fact.objects.for_memory(memory).readable_by(reader).exists()
    for fact in Fact.objects.for_memory(memory):
        labels = {p.label_set_id for p in fact.passages.all()}
        assert sorted(fact.label_sets) == sorted(labels)
