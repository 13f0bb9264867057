from celery import shared_task

from brain import health


@shared_task(bind=True, ignore_result=True)
def heartbeat(self) -> None:
    health.record_heartbeat(hostname=self.request.hostname or "worker")
