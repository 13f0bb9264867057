"""The platform every app may use.

Importing the package imports nothing else: the worker program (``brain/worker/``) runs from
this folder on machines with no Django and no Celery. The Celery app is loaded by every Django
process in ``BrainConfig.ready()``, before any task is sent (so ``@shared_task`` binds to it),
and by ``celery -A brain``, which finds ``brain.celery.app``; ``brain.celery_app`` still names it.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from brain.celery import app

        return app
    raise AttributeError(f"module 'brain' has no attribute {name!r}")
