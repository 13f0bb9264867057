"""Two writers adding passages to one source at once (a conversation's reflection and its next
turn) each get a place of their own: the second waits for the first and comes after it."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from knowledge import passages
from knowledge.models import Memory, Passage, Source


@pytest.mark.django_db(transaction=True)
def test_a_writer_that_waited_for_another_adds_its_passage_after_the_others():
    memory = Memory.objects.create(slug="places", name="Places")
    source = Source.objects.create(memory=memory, kind=Source.Kind.NOTE, title="A chat")
    passages.add(source, ["The first turn."])
    first_holds_the_source = threading.Event()
    failures: list[BaseException] = []

    def first() -> None:
        try:
            with transaction.atomic():
                passages.add(source, ["The second turn."])
                first_holds_the_source.set()
                # The other writer is waiting for this transaction's lock on the source.
                threading.Event().wait(0.5)
        except BaseException as error:  # reported below, in the test's own thread
            failures.append(error)
        finally:
            first_holds_the_source.set()
            connections.close_all()

    def second() -> None:
        first_holds_the_source.wait(5)
        try:
            passages.add(source, ["The third turn."])
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    writers = [threading.Thread(target=first), threading.Thread(target=second)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(10)

    assert failures == []
    placed = Passage.objects.filter(source=source).order_by("ordinal")
    assert list(placed.values_list("ordinal", "text")) == [
        (0, "The first turn."),
        (1, "The second turn."),
        (2, "The third turn."),
    ]
