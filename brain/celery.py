"""The Celery app. Tasks are thin; the embedded broker is started before anything talks to it."""

import os

from celery import Celery
from celery.signals import beat_init, before_task_publish, celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")

app = Celery("brain")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _ensure_embedded_broker(**_kwargs) -> None:
    from brain import embedded

    embedded.ensure_broker(app.conf.broker_url)


# The worker and beat start it before connecting; a web process before its first publish.
celeryd_init.connect(_ensure_embedded_broker, weak=False)
beat_init.connect(_ensure_embedded_broker, weak=False)
before_task_publish.connect(_ensure_embedded_broker, weak=False)
