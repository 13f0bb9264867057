from celery import shared_task
from celery.signals import worker_ready
from django.db import connection

from brain import health


@shared_task(bind=True, ignore_result=True)
def heartbeat(self) -> None:
    health.record_heartbeat(hostname=self.request.hostname or "worker")


@worker_ready.connect(weak=False)
def first_heartbeat(sender=None, **_kwargs) -> None:
    """A worker says it is there as soon as it is ready to take tasks (this module is imported
    when the worker finds its tasks): /healthz knows it within seconds of `make run` starting,
    not after beat's first heartbeat a minute later."""
    try:
        health.record_heartbeat(hostname=getattr(sender, "hostname", None) or "worker")
    finally:
        connection.close()  # the pool's processes keep connections of their own
