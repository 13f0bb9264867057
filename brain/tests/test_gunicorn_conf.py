"""What gunicorn's settings do in a web process beyond gunicorn's own options."""

from __future__ import annotations

import threading

from brain import gunicorn_conf
from knowledge import embedding


def test_each_web_process_loads_the_embedding_models_on_a_thread_as_it_starts(monkeypatch):
    """gunicorn_conf tells the apps (``brain.serving``); the knowledge app starts the thread."""
    loaded_on = []
    done = threading.Event()

    def warm_up():
        loaded_on.append(threading.current_thread().name)
        done.set()

    monkeypatch.setattr(embedding, "warm_up", warm_up)

    gunicorn_conf.post_worker_init(worker=None)

    assert done.wait(timeout=10)
    assert loaded_on == ["embed-warm-up"]
