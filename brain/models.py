from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker ran the beat's heartbeat task: proof both are alive."""

    hostname = models.CharField(max_length=255, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%Y-%m-%d %H:%M:%S}"
