"""A run row is its lease (brain/leases.py): only the process holding a run renews or settles
it, and a lost run is settled only as it was seen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain import leases
from memory.models import ConsolidationRun

LEASE = timedelta(minutes=5)


@pytest.fixture
def run(home):
    return ConsolidationRun.objects.create(
        memory=home,
        trigger=ConsolidationRun.Trigger.MANUAL,
        lease_expires_at=timezone.now() + LEASE,
    )


def _taken_over_by(run: ConsolidationRun, other: str, monkeypatch) -> None:
    """``other`` (host:pid of another worker process) takes ``run`` over as it would: its lease
    ran out while this process still worked on it."""
    ConsolidationRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())
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
