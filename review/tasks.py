import httpx2
from celery import shared_task

from review import deep_review as deep_reviews
from review import findings, guesses, house_events, timeline
from review import insight as review_insight
from review.models import Event


@shared_task(
    autoretry_for=(httpx2.HTTPError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
    ignore_result=True,
)
def push_event(event_id: int) -> None:
    event = (
        Event.objects.as_system("the event a push sends (it sends what every member reads)")
        .select_related("memory")
        .filter(pk=event_id)
        .first()
    )
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
    deep_reviews.execute(review_id)


@shared_task(acks_late=True, ignore_result=True)
def insight(run_id: int) -> None:
    """One insight run. Safe to run twice; exits when its row is claimed, settled or gone."""
    review_insight.execute(run_id)


@shared_task(ignore_result=True)
def insight_every_memory() -> None:
    """Beat: events past their keeping removed, then an insight run for every learning memory."""
    house_events.remove_old()
    review_insight.every_memory()


@shared_task(ignore_result=True)
def deep_review_every_memory() -> None:
    """Beat: Deep review of every learning memory, as the Knowledge tab's button starts it."""
    deep_reviews.start_every_deep_review()
