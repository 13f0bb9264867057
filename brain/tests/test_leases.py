"""A run row is its lease (brain/leases.py): only the process holding a run renews or settles
it, and a lost run is settled only as it was seen; every run kind's task is the one driver."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from brain import leases
from knowledge.models import CompileRun, Source
from memory import compiling, consolidator, reflection, study
from memory.models import ConsolidationRun, ReflectionRun, StudySession
from review import deep_review, insight
from review.models import DeepReview, InsightRun

LEASE = timedelta(minutes=5)


@pytest.fixture
def run(home):
    return ConsolidationRun.objects.create(
        memory=home,
        trigger=ConsolidationRun.Trigger.MANUAL,
        lease_expires_at=timezone.now() + LEASE,
    )


def _taken_over_by(run, other: str, monkeypatch) -> None:
    """``other`` (host:pid of another worker process) takes ``run`` over as it would: its lease
    ran out while this process still worked on it."""
    type(run)._base_manager.filter(pk=run.pk).update(lease_expires_at=timezone.now())
    run.refresh_from_db()
    with monkeypatch.context() as elsewhere:
        elsewhere.setattr(leases, "executor", lambda: other)
        assert leases.take_over(run, lease=LEASE)


def test_the_process_holding_a_run_renews_it_and_settles_it_once(run):
    assert leases.claim(run, lease=LEASE)
    before = ConsolidationRun.objects.get(pk=run.pk).lease_expires_at

    assert leases.renew(run, lease=LEASE * 2)
    assert ConsolidationRun.objects.get(pk=run.pk).lease_expires_at > before
    assert leases.finish(run, ConsolidationRun.State.FILED, reason="filed")
    assert not leases.finish(run, ConsolidationRun.State.FAILED, reason="late")
    assert not leases.renew(run, lease=LEASE)

    settled = ConsolidationRun.objects.get(pk=run.pk)
    assert (settled.state, settled.reason) == ("filed", "filed")


def test_a_run_taken_over_by_another_process_can_neither_be_renewed_nor_settled_by_the_first(
    run, monkeypatch
):
    assert leases.claim(run, lease=LEASE)
    _taken_over_by(run, "another-host:4242", monkeypatch)
    held = ConsolidationRun.objects.get(pk=run.pk)

    assert not leases.renew(run, lease=LEASE)
    assert not leases.finish(run, ConsolidationRun.State.FAILED, reason="it was mine")
    assert not leases.settle_lost(run, ConsolidationRun.State.FAILED, reason="it was lost")

    now = ConsolidationRun.objects.get(pk=run.pk)
    assert now.state == ConsolidationRun.State.RUNNING and not now.reason
    assert now.executor == "another-host:4242"
    assert now.lease_expires_at == held.lease_expires_at


def test_a_lost_run_is_settled_as_seen_and_not_once_another_process_took_it_over(run, monkeypatch):
    assert leases.claim(run, lease=LEASE)
    ConsolidationRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())
    seen = ConsolidationRun.objects.get(pk=run.pk)
    _taken_over_by(run, "another-host:4242", monkeypatch)

    assert not leases.settle_lost(seen, ConsolidationRun.State.FAILED, reason="it was lost")
    assert ConsolidationRun.objects.get(pk=run.pk).state == ConsolidationRun.State.RUNNING

    lost = ConsolidationRun.objects.get(pk=run.pk)
    ConsolidationRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())
    lost.refresh_from_db()
    assert leases.settle_lost(lost, ConsolidationRun.State.FAILED, reason="it was lost")
    assert ConsolidationRun.objects.get(pk=run.pk).state == ConsolidationRun.State.FAILED


def _source(memory, kind: str) -> Source:
    return Source.objects.create(memory=memory, kind=kind, title=f"a {kind}")


# Each run kind: how its task runs it, and a running row of it asked for on ``memory``.
KINDS = {
    "consolidation pass": (
        consolidator.PASSES,
        lambda memory: {"model": ConsolidationRun, "memory": memory, "trigger": "manual"},
    ),
    "reflection": (
        reflection.REFLECTIONS,
        lambda memory: {
            "model": ReflectionRun,
            "memory": memory,
            "source": _source(memory, Source.Kind.CONVERSATION),
        },
    ),
    "compile": (
        compiling.COMPILES,
        lambda memory: {
            "model": CompileRun,
            "memory": memory,
            "source": _source(memory, Source.Kind.NOTE),
        },
    ),
    "study session": (
        study.SESSIONS,
        lambda memory: {"model": StudySession, "memory": memory, "topic": "the boiler"},
    ),
    "insight run": (insight.RUNS, lambda memory: {"model": InsightRun, "memory": memory}),
    "deep review": (deep_review.REVIEWS, lambda memory: {"model": DeepReview, "memory": memory}),
}


@pytest.mark.parametrize("name", KINDS)
def test_a_run_taken_over_while_its_work_goes_on_is_neither_renewed_nor_settled_by_the_first(
    name, home, monkeypatch
):
    kind, asked = KINDS[name]
    fields = asked(home)
    model = fields.pop("model")
    run = leases.start(model, lease=LEASE, **fields)
    renewed = []

    def work(mine) -> None:
        _taken_over_by(mine, "another-host:4242", monkeypatch)
        renewed.append(mine.renew())
        raise RuntimeError("the first process fails after its run was taken over")

    assert leases.drive(dataclasses.replace(kind, work=work), run.pk) is not None

    assert renewed == [False]
    now = model._base_manager.get(pk=run.pk)
    assert now.state == leases.RUNNING and now.finished_at is None
    assert now.executor == "another-host:4242"


@pytest.mark.parametrize("name", KINDS)
def test_a_run_held_by_a_living_process_is_left_alone_by_a_second_message(name, home):
    kind, asked = KINDS[name]
    fields = asked(home)
    model = fields.pop("model")
    run = leases.start(model, lease=LEASE, **fields)
    assert leases.claim(run, lease=LEASE)

    assert leases.drive(kind, run.pk) is None
    assert model._base_manager.get(pk=run.pk).state == leases.RUNNING
