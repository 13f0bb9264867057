from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"

    def ready(self) -> None:
        from knowledge.actions import brain_learned

        # The timeline records every new fact (an integration point, not domain flow).
        brain_learned.connect(_on_learned, weak=False, dispatch_uid="review.timeline.learned")


def _on_learned(sender, *, fact, memory, **kwargs) -> None:
    from review import timeline

    timeline.record_learned(fact=fact, memory=memory)
