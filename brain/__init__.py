"""The platform every app may use.

Importing the package imports nothing else: the worker program (``brain/worker/``) runs from
this folder on machines with no Django and no Celery. The Celery app is loaded by every Django
process in ``BrainConfig.ready()``, before any task is sent (so ``@shared_task`` binds to it),
and by ``celery -A brain``, which finds ``brain.celery.app``; ``brain.celery_app`` still names it.

One setting for the whole process, made before anything loads numpy: its BLAS uses one thread.
Every process here is one of several on a few cores (web workers, Celery, the database, the
embedder's own thread), and the matrices brain multiplies are small (recall's diversity
re-ranking: 80 vectors of 384). Measured on two busy cores: that product took 0.25 ms on one
thread and 5 ms at the median (8.6 ms on average) when BLAS woke threads of its own for it.
"""

import os
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from brain.celery import app

        return app
    raise AttributeError(f"module 'brain' has no attribute {name!r}")
