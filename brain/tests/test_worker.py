import pytest

from brain.models import WorkerHeartbeat
from brain.tasks import heartbeat
from brain.testing import wait_until


@pytest.mark.worker
def test_a_real_worker_runs_a_task_and_its_result_lands_in_the_database(celery_worker):
    assert not WorkerHeartbeat.objects.exists()

    heartbeat.delay()

    beat = wait_until(
        WorkerHeartbeat.objects.first, timeout=30, message="the worker never recorded its heartbeat"
    )
    assert beat.hostname.startswith("test-worker-")


@pytest.mark.worker
def test_healthz_reports_the_worker_as_seen_after_its_heartbeat(celery_worker, client):
    heartbeat.delay()
    wait_until(WorkerHeartbeat.objects.exists, timeout=30)

    worker = client.get("/healthz").json()["worker"]

    assert worker["status"] == "ok"
    assert worker["hostname"].startswith("test-worker-")
