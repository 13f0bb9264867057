"""The Celery app. Tasks are thin; the embedded broker is started before anything talks to it."""

import os

from celery import Celery
from celery.schedules import crontab
from celery.signals import beat_init, before_task_publish, celeryd_init
from django.conf import settings
from django.db import transaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brain.settings")

app = Celery("brain")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def beat_schedule(entries: dict) -> dict:
    """``CELERY_BEAT_SCHEDULE`` as beat reads it: an entry's "crontab" (the keyword arguments of
    celery's crontab, kept as data so that loading the settings does not load Celery) made a
    crontab schedule."""
    return {
        name: {key: value for key, value in entry.items() if key != "crontab"}
        | ({"schedule": crontab(**entry["crontab"])} if "crontab" in entry else {})
        for name, entry in entries.items()
    }


app.conf.beat_schedule = beat_schedule(settings.CELERY_BEAT_SCHEDULE)


def _ensure_embedded_broker(**_kwargs) -> None:
    from brain import embedded

    embedded.ensure_broker(app.conf.broker_url)


# The worker and beat start it before connecting; a web process before its first publish.
celeryd_init.connect(_ensure_embedded_broker, weak=False)
beat_init.connect(_ensure_embedded_broker, weak=False)
before_task_publish.connect(_ensure_embedded_broker, weak=False)


def send_on_commit(task: str, *args) -> None:
    """Send ``task`` (its registered name, "memory.tasks.consolidate") with ``args`` once the
    current transaction commits, or at once outside one.

    By name, because the module that starts a task is the one the task calls back into: a
    module importing its own tasks module would import itself back (a test of the import graph
    forbids it, and another checks every name sent is a registered task).

    The embedded broker is started first: ``before_task_publish`` comes too late for a process
    that has not published yet, whose result backend connects before it (a terminal command
    with no worker running failed so). The send is robust: what the transaction wrote stays
    written, and a task that could not be sent is logged, not raised, since every one has a
    sweep on beat that finds its work again (a pass asked for, vectors still stale)."""

    def send() -> None:
        _ensure_embedded_broker()
        app.send_task(task, args=list(args))

    transaction.on_commit(send, robust=True)
