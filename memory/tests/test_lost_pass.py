"""A failed or lost pass always leads to a new pass while items wait: the redelivered message
that finds its pass's process gone asks for one, and the sweep asks whenever the last pass did
not finish its work — at once after one failure, then less often while failures repeat."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from brain import testing
from brain.tests.stubs.messages import TEST_API_KEY, MessagesStub, stub_json
from memory import actions, consolidator
from memory.composers.base import ComposerError, Composition
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin

LOFT = "The loft is warm."
FILED_DOCUMENT = "# Memory\n\n## Rooms\n\n- The loft is warm.\n"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _a_pass_whose_process_died(home) -> ConsolidationRun:
    run = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    ConsolidationRun.objects.filter(pk=run.pk).update(
        claimed_at=timezone.now(), executor=f"{socket.gethostname()}:{_dead_pid()}"
    )
    return run


def _settled_by_someone_else(home, state: str = "failed", ago=timedelta(minutes=5)) -> None:
    """A pass that ended without filing, as the redelivery or a failure leaves it."""
    run = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    ConsolidationRun.objects.filter(pk=run.pk).update(
        state=state, reason="The pass was lost.", finished_at=timezone.now() - ago
    )
    ConsolidationRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - ago)


def _restarted(home) -> ConsolidationRun | None:
    return ConsolidationRun.objects.running().filter(memory=home).first()


def test_the_redelivered_message_of_a_dead_pass_settles_it_and_asks_for_a_new_one(
    home, django_capture_on_commit_callbacks
):
    actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.TYPED)
    lost = _a_pass_whose_process_died(home)

    with django_capture_on_commit_callbacks(execute=True) as sent:
        consolidator.execute(lost.pk)  # the message, back after its worker process died

    lost.refresh_from_db()
    assert lost.state == "failed"
    assert lost.reason.startswith("The pass was lost: the worker running it stopped")
    restarted = _restarted(home)
    assert restarted.trigger == ConsolidationRun.Trigger.SWEEP
    assert len(sent) == 1  # its start message


def test_a_dead_pass_with_nothing_waiting_is_settled_and_not_restarted(home):
    lost = _a_pass_whose_process_died(home)

    consolidator.execute(lost.pk)

    assert ConsolidationRun.objects.get(pk=lost.pk).state == "failed"
    assert _restarted(home) is None


def test_the_sweep_restarts_a_pass_that_something_else_marked_lost(
    home, django_capture_on_commit_callbacks
):
    for n in range(19):
        actions.add_to_inbox(memory=home, text=f"Fact number {n} is true.", origin=Origin.TYPED)
    _settled_by_someone_else(home)

    with django_capture_on_commit_callbacks():
        consolidator.sweep()

    assert _restarted(home).trigger == ConsolidationRun.Trigger.SWEEP


def test_the_sweep_restarts_a_pass_whose_composer_failed(home, scripted):
    actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.TYPED)
    scripted(ComposerError("overloaded_error: Overloaded"))
    failed = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    consolidator.execute(failed.pk)
    assert ConsolidationRun.objects.get(pk=failed.pk).state == "failed"

    consolidator.sweep()

    assert _restarted(home).trigger == ConsolidationRun.Trigger.SWEEP


def test_the_sweep_leaves_items_for_the_daily_pass_when_the_last_pass_did_its_work(home, scripted):
    actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.TYPED)
    scripted(Composition(document=FILED_DOCUMENT, voice=""))
    filed = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    consolidator.execute(filed.pk)
    actions.add_to_inbox(memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED)
    _settled_by_someone_else(home, state="kept")

    consolidator.sweep()

    assert _restarted(home) is None


def test_the_sweep_does_not_restart_a_memory_that_is_not_learning(home):
    actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.TYPED)
    _settled_by_someone_else(home)
    home.learning = False
    home.save(update_fields=["learning"])

    consolidator.sweep()

    assert _restarted(home) is None


def test_repeated_failures_are_retried_less_and_less_often(home):
    actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.TYPED)
    for _ in range(3):
        _settled_by_someone_else(home, ago=timedelta(minutes=3))

    consolidator.sweep()  # three in a row: the next try waits 4 minutes after the last
    assert _restarted(home) is None

    ConsolidationRun.objects.filter(memory=home).update(
        finished_at=timezone.now() - timedelta(minutes=5)
    )
    consolidator.sweep()
    assert _restarted(home).trigger == ConsolidationRun.Trigger.SWEEP


def test_the_pause_between_tries_doubles_and_stops_at_an_hour():
    pauses = [consolidator.retry_pause(failures) for failures in range(1, 9)]

    minutes = [pause.total_seconds() / 60 for pause in pauses]
    assert minutes == [0, 2, 4, 8, 16, 32, 60, 60]


# A real worker whose pool process is killed mid-pass ---------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_killing_the_pool_process_mid_pass_leads_to_a_new_pass_that_files_the_items(home):
    with MessagesStub() as stub:
        stub.script(
            stub_json({"decision": "write", "reason": "", "document": FILED_DOCUMENT}, hang_s=60),
            stub_json(
                {"decision": "write", "reason": "filed", "document": FILED_DOCUMENT, "voice": ""}
            ),
        )
        actions.add_to_inbox(memory=home, text=LOFT, origin=Origin.VOICE)
        env = {
            "ANTHROPIC_API_KEY": TEST_API_KEY,
            "ANTHROPIC_BASE_URL": stub.base_url,
            "BRAIN_LLM_MAX_RETRIES": "0",
        }
        with testing.celery_worker(connection.settings_dict, extra_env=env) as worker:
            first = consolidator.request_consolidation(memory=home, trigger="manual")
            claimed = testing.wait_until(
                lambda: ConsolidationRun.objects.filter(
                    pk=first.run.pk, claimed_at__isnull=False
                ).first(),
                timeout=30,
            )
            testing.wait_until(lambda: len(stub.requests) == 1, timeout=30)
            pool_process = int(claimed.executor.rpartition(":")[2])
            assert pool_process != worker.pid  # the child running the pass, not the worker
            os.kill(pool_process, signal.SIGKILL)

            filed = testing.wait_until(
                lambda: ConsolidationRun.objects.filter(memory=home, state="filed").first(),
                timeout=90,
                message="no new pass filed what was waiting",
            )

    lost = ConsolidationRun.objects.get(pk=first.run.pk)
    assert lost.state == "failed"
    assert lost.reason.startswith("The pass was lost")
    assert filed.trigger == ConsolidationRun.Trigger.SWEEP
    assert DocumentRevision.objects.current(home).text == FILED_DOCUMENT
    assert not InboxItem.objects.pending().exists()
