"""Passes run by a real Celery worker process: concurrency, slow composers, a killed worker."""

import os
import signal
import threading

import pytest
from django.db import connection

from brain import testing
from brain.tests.stubs.messages import TEST_API_KEY, MessagesStub, stub_json
from knowledge.models import Memory
from memory import actions, consolidator
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.tasks import consolidate

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

DISTINCT_FACTS = [
    "The loft is warm.",
    "Sarah is a light sleeper.",
    "The garage fridge runs all year.",
    "Guests use the loft.",
    "The dog gets fed at 7 and 17.",
]
FILED_DOCUMENT = "# Memory\n\n## Rooms\n\n- The loft is warm.\n"


@pytest.fixture
def home():
    return Memory.objects.default()


@pytest.fixture
def stub():
    with MessagesStub() as server:
        yield server


def _worker_env(stub: MessagesStub) -> dict:
    return {
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": stub.base_url,
        "BRAIN_LLM_MAX_RETRIES": "0",
    }


def _settled(run_id: int):
    run = ConsolidationRun.objects.get(pk=run_id)
    return None if run.is_running else run


def _claimed(run_id: int):
    run = ConsolidationRun.objects.get(pk=run_id)
    return run if run.claimed_at else None


def test_two_passes_requested_at_once_run_exactly_once(home):
    for text in DISTINCT_FACTS:
        actions.add_to_inbox(memory=home, text=text, origin=Origin.TYPED)
    results, barrier = [], threading.Barrier(2)

    def press_file_now():
        barrier.wait()
        results.append(consolidator.request_consolidation(memory=home, trigger="manual"))
        connection.close()

    with testing.celery_worker(connection.settings_dict, concurrency=2):
        presses = [threading.Thread(target=press_file_now) for _ in range(2)]
        for press in presses:
            press.start()
        for press in presses:
            press.join()
        started = [r for r in results if r.started]
        assert len(started) == 1
        assert {r.run.pk for r in results} == {started[0].run.pk}
        consolidate.delay(started[0].run.pk)  # the same start message, delivered again
        run = testing.wait_until(lambda: _settled(started[0].run.pk), timeout=60)

    assert run.state == "filed", run.reason
    assert ConsolidationRun.objects.count() == 1
    assert DocumentRevision.objects.filter(memory=home).count() == 1
    assert Change.objects.count() == 5
    assert not InboxItem.objects.pending().exists()


def test_fifty_facts_added_during_a_slow_pass_wait_for_the_next_one(home, stub):
    stub.script(
        stub_json(
            {
                "decision": "write",
                "reason": "filed",
                "document": FILED_DOCUMENT,
                "voice": "The loft is warm.",
            },
            hang_s=4,
        )
    )
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.VOICE)

    with testing.celery_worker(connection.settings_dict, extra_env=_worker_env(stub)):
        request = consolidator.request_consolidation(memory=home, trigger="manual")
        testing.wait_until(lambda: _claimed(request.run.pk), timeout=30)
        for n in range(50):
            actions.add_to_inbox(memory=home, text=f"Late fact number {n}.", origin=Origin.CHAT)
        run = testing.wait_until(lambda: _settled(request.run.pk), timeout=60)

    assert run.state == "filed", run.reason
    assert run.composer == "anthropic"
    assert DocumentRevision.objects.current(home).text == FILED_DOCUMENT
    assert InboxItem.objects.filter(state="filed").count() == 1
    assert InboxItem.objects.pending().count() == 50


def test_a_worker_killed_mid_pass_writes_nothing_and_the_pass_is_marked_failed(home, stub):
    stub.script(
        stub_json(
            {"decision": "write", "reason": "filed", "document": FILED_DOCUMENT, "voice": ""},
            hang_s=60,
        ),
        stub_json({"decision": "keep", "reason": "Nothing new."}),
    )
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.VOICE)

    with testing.celery_worker(connection.settings_dict, extra_env=_worker_env(stub)):
        request = consolidator.request_consolidation(memory=home, trigger="manual")
        claimed = testing.wait_until(lambda: _claimed(request.run.pk), timeout=30)
        # Mid-pass: the pass is waiting on the model (had it not asked yet, the pass asked for
        # in its place would take the hanging reply and keep the worker from stopping).
        testing.wait_until(lambda: len(stub.requests) == 1, timeout=30)
        os.kill(int(claimed.executor.rpartition(":")[2]), signal.SIGKILL)
        # The message comes back (acks_late, reject_on_worker_lost); its redelivery finds the
        # pass's process gone and settles the run.
        lost = testing.wait_until(lambda: _settled(request.run.pk), timeout=60)

    assert lost.state == "failed"
    assert lost.reason.startswith("The pass was lost: the worker running it stopped")
    assert not DocumentRevision.objects.filter(memory=home).exists()
    assert InboxItem.objects.pending().count() == 1
    restarted = ConsolidationRun.objects.exclude(pk=request.run.pk).get()
    assert restarted.trigger == ConsolidationRun.Trigger.SWEEP  # a new pass was asked for
