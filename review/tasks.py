import httpx2
from celery import shared_task

from review import findings, guesses, timeline
from review.deep_review import run_for_id
from review.models import Event


@shared_task(
    autoretry_for=(httpx2.HTTPError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
    ignore_result=True,
)
def push_event(event_id: int) -> None:
    event = Event.objects.select_related("memory").filter(pk=event_id).first()
    if event is not None and event.pushed_at is None:
        timeline.push(event)


@shared_task(ignore_result=True)
def tend() -> None:
    """Daily: guesses expire, wake and fill free slots; fixes that held 90 days close."""
    guesses.tend_guesses()
    findings.lapse_suppressions()


@shared_task(acks_late=True, ignore_result=True)
def deep_review(review_id: int) -> None:
    """Deep review from the Knowledge tab. Safe to run twice; exits when its row is settled."""
    run_for_id(review_id)
