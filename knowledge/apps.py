"""The knowledge app. As a web process starts serving (``brain.serving``), it loads the
embedding models on a thread, so the first question does not wait about a second for them."""

import threading

from django.apps import AppConfig


def warm_up_on_a_thread(**kwargs) -> None:
    from knowledge import embedding

    threading.Thread(target=embedding.warm_up, name="embed-warm-up", daemon=True).start()


class KnowledgeConfig(AppConfig):
    name = "knowledge"

    def ready(self) -> None:
        from brain.serving import serving_started

        serving_started.connect(warm_up_on_a_thread, dispatch_uid="knowledge.warm_up")
