"""The reflection pass run by a real Celery worker: a conversation posted twice is reflected on
once, and a worker killed mid-reflection leaves it to be reflected on once, later."""

import os
import signal

import pytest
from django.db import connection

from brain import testing
from brain.tests.stubs.messages import TEST_API_KEY, MessagesStub, stub_json
from knowledge.models import Fact, Memory, Observation
from memory import reflection
from memory.models import InboxItem, ReflectionRun
from memory.tasks import reflect

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BEDROOM = [
    {"speaker": "Sarah", "text": "I like the bedroom at 19"},
    {"speaker": "brain", "text": "Noted."},
    {"speaker": "Tom", "text": "I like it at 21"},
]


@pytest.fixture
def home():
    return Memory.objects.default()


@pytest.fixture
def stub():
    with MessagesStub() as server:
        yield server


def _settled(run_id: int):
    run = ReflectionRun.objects.get(pk=run_id)
    return None if run.is_running else run


def _claimed(run_id: int):
    run = ReflectionRun.objects.get(pk=run_id)
    return run if run.claimed_at else None


def test_a_conversation_sent_twice_is_reflected_on_once_by_the_worker(home):
    with testing.celery_worker(connection.settings_dict):
        _, run = reflection.conversation_ended(memory=home, channel="voice", messages=BEDROOM)
        again, none = reflection.conversation_ended(memory=home, channel="voice", messages=BEDROOM)
        reflect.delay(run.pk)  # the start message, delivered a second time
        settled = testing.wait_until(lambda: _settled(run.pk), timeout=60)
        reflect.delay(run.pk)  # and a third, after it finished
        testing.wait_until(lambda: ReflectionRun.objects.count() == 1, timeout=5)

    assert settled.state == ReflectionRun.State.FILED, settled.reason
    assert none is None and not again.created
    assert sorted(Fact.objects.values_list("text", flat=True)) == [
        "Sarah likes the bedroom at 19.",
        "Tom likes the bedroom at 21.",
    ]
    assert set(Fact.objects.values_list("support", flat=True)) == {1}
    assert InboxItem.objects.count() == 2


def test_a_worker_killed_mid_reflection_leaves_it_reflected_on_once_later(home, stub):
    stub.script(
        stub_json({"facts": []}, hang_s=60),  # the first worker dies waiting for this
        stub_json(
            {
                "facts": [
                    {"turn": 0, "kind": "preference", "text": "Sarah likes the bedroom at 19."},
                    {"turn": 2, "kind": "preference", "text": "Tom likes the bedroom at 21."},
                ]
            }
        ),
    )
    env = {
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": stub.base_url,
        "BRAIN_LLM_MAX_RETRIES": "0",
    }

    with testing.celery_worker(connection.settings_dict, extra_env=env):
        _, run = reflection.conversation_ended(memory=home, channel="voice", messages=BEDROOM)
        claimed = testing.wait_until(lambda: _claimed(run.pk), timeout=30)
        testing.wait_until(lambda: len(stub.requests) == 1, timeout=30)  # mid-reflection
        os.kill(int(claimed.executor.rpartition(":")[2]), signal.SIGKILL)
        # The message comes back (acks_late, reject_on_worker_lost); the worker that takes it
        # finds the run's process gone, takes the run over and finishes it.
        settled = testing.wait_until(lambda: _settled(run.pk), timeout=60)

    assert settled.state == ReflectionRun.State.FILED, settled.reason
    assert settled.executor != claimed.executor
    assert ReflectionRun.objects.count() == 1
    assert len(stub.requests) == 2
    assert Fact.objects.count() == 2
    assert Observation.objects.count() == 2  # each said once: nothing filed twice
