"""A web process starting to serve: a signal apps connect to, as the platform imports no app.

``serving_started`` is sent once in each web worker process, after Django is set up and before
its first request (gunicorn's ``post_worker_init``, ``brain/gunicorn_conf.py``). A receiver
must return at once: slow work (loading a model) goes on a thread of its own.
"""

from __future__ import annotations

from django.dispatch import Signal

serving_started = Signal()
