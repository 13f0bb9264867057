"""Relabelling while a compile runs: no fact it writes is ever readable by a role that cannot read
all its passages, at any moment a concurrent reader looks (facts follow their passages in the
transaction that cites or relabels them: knowledge/visibility.py, "Concurrency")."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from knowledge import compile_requests, labelling, sources
from knowledge.models import CompileRun, Fact, Passage
from knowledge.tests.test_compiling import make_team
from knowledge.tests.test_relabel_race import _broken_now, _in_thread
from memory import compiling

PASSAGES = 24
FLIPS = 40


@pytest.mark.django_db(transaction=True)
def test_relabelling_while_a_compile_runs_never_lets_a_reader_read_a_fact_they_should_not(
    monkeypatch,
):
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *args: None)  # run here
    team = make_team()
    text = "\n\n".join(
        f"Rossi Srl order {n} ships in week {n} with Luca Bianchi." for n in range(PASSAGES)
    )
    source = sources.add_source(
        memory=team.memory, by=team.admin, text=text, title="orders.md", labels=[team.sales]
    ).source
    run = CompileRun.objects.get(source=source)
    assert Passage.objects.filter(source=source).count() == PASSAGES
    moving = list(source.passages.order_by("ordinal")[::2])  # every other passage flips
    failures: list = []
    broken: list[int] = []
    done = threading.Event()
    compiled = threading.Event()

    def compile_it() -> None:
        compiling.execute(run.pk)
        compiled.set()

    flips_while_compiling: list[int] = []
    looks: list[int] = []

    def relabel() -> None:
        n = 0
        while n < FLIPS or not compiled.is_set():
            labelling.label_passages(moving, [team.hr] if n % 2 == 0 else [team.sales])
            if not compiled.is_set():
                flips_while_compiling.append(n)
            n += 1
            time.sleep(0.005)
        labelling.label_passages(moving, [team.hr])

    def read() -> None:
        while not done.is_set():
            broken.extend(_broken_now(team.memory, team.sales_reader))
            looks.append(1)

    reading = _in_thread(read, failures)
    workers = [_in_thread(compile_it, failures), _in_thread(relabel, failures)]
    for worker in workers:
        worker.join(timeout=300)
    done.set()
    reading.join(timeout=30)
    connections.close_all()

    run.refresh_from_db()
    assert failures == [] and broken == []
    assert len(flips_while_compiling) >= 10 and len(looks) >= 10  # it did race
    assert run.state == CompileRun.State.COMPILED, run.reason
    assert run.passages_done == PASSAGES
    facts = Fact.objects.for_memory(team.memory)
    assert facts.count() == PASSAGES
    for fact in facts:
        assert sorted(fact.label_sets) == sorted({p.label_set_id for p in fact.passages.all()})
    # In the end every other passage is HR: Giulia reads exactly the facts of the others.
    assert facts.readable_by(team.sales_reader).count() == PASSAGES // 2
    assert facts.readable_by(team.hr_reader).count() == PASSAGES // 2
