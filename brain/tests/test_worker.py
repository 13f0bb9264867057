import pytest

from brain.models import WorkerHeartbeat
from brain.tasks import heartbeat
from brain.testing import wait_until


@pytest.mark.worker
def test_a_worker_checks_in_as_soon_as_it_is_ready(celery_worker):
    """Before beat's first heartbeat (a minute after start): /healthz knows it at once."""
    assert WorkerHeartbeat.objects.get().hostname.startswith("test-worker-")


@pytest.mark.worker
def test_a_real_worker_runs_a_task_and_its_result_lands_in_the_database(celery_worker):
    WorkerHeartbeat.objects.all().delete()  # the one it recorded when it was ready

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
