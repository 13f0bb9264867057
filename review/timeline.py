"""The timeline: brain_learned, brain_finding and brain_waiting_on_you events, recorded and —
when Home Assistant is configured (HA_URL, HA_TOKEN) — pushed to it as events and sensor states,
after commit, by the ``review.tasks.push_event`` task (sent by name: the task calls back into
this module).

brain_waiting_on_you is recorded whenever a guess opens, is answered, sleeps, wakes or expires
(``review.guesses``), with the open guesses and their ids, so the binary sensor follows every
change and an automation can push a guess to a phone the moment it waits: a guess in a panel
nobody opens expires unanswered.
"""

from __future__ import annotations

import logging

import httpx2
from django.conf import settings
from django.utils import timezone

from brain.celery import send_on_commit
from knowledge import visibility
from knowledge.models import Fact, Memory
from review import counts, status
from review.models import Event, Guess

logger = logging.getLogger(__name__)
PUSH_TIMEOUT_S = 10.0


def configured() -> bool:
    return bool(settings.HA_URL and settings.HA_TOKEN)


def record(memory: Memory, kind: str, text: str, data: dict, *, shared: bool = True) -> Event:
    """Put an event on the timeline, and push it once the transaction commits when it is
    ``shared``: what every member of the memory may read (Home Assistant's screens are the
    household's)."""
    event = Event.objects.create(memory=memory, kind=kind, text=text, data=data)
    if configured() and shared:
        send_on_commit("review.tasks.push_event", event.pk)
    return event


def record_learned(*, fact: Fact, memory: Memory) -> Event:
    """brain_learned, on the timeline of those who may read ``fact`` (``Event`` readable_by);
    pushed only when every member of the memory may."""
    return record(
        memory,
        Event.Kind.LEARNED,
        f"brain learned: {fact.text}",
        {"fact": fact.pk},
        shared=_shared(memory, fact.pk),
    )


def _shared(memory: Memory, fact_id: int | None) -> bool:
    """Whether every member of ``memory`` may read the fact (True for an event about none):
    asked only when there is a Home Assistant to push to."""
    if fact_id is None or not configured():
        return True
    everyone = visibility.household(memory)
    return Fact.objects.readable_by(everyone).filter(pk=fact_id).exists()


WAITING_WORDS = {
    "opened": "Waiting on you",
    "woke": "Back, waiting on you",
    "confirmed": "Answered yes",
    "rejected": "Answered no",
    "slept": "Dismissed for now",
    "expired": "Expired unanswered",
}


def record_waiting(*, guess: Guess, change: str) -> Event:
    """A guess changed (a key of WAITING_WORDS): the event names it and carries every open
    guess, as the binary sensor's attributes do."""
    waiting = [
        {"id": g.pk, "question": g.question}
        for g in Guess.objects.for_memory(guess.memory).open().order_by("offered_at", "pk")
    ]
    # Everything waiting on a decision, findings too (review.counts): never "nothing waits on
    # you" while a finding does.
    deciding = counts.waiting_on_you(guess.memory)
    count = (
        f"{deciding} wait{'s' if deciding == 1 else ''} on you"
        if deciding
        else "nothing waits on you"
    )
    return record(
        guess.memory,
        Event.Kind.WAITING,
        f"{WAITING_WORDS[change]}: “{guess.question}” ({count})",
        {
            "change": change,
            "guess": guess.pk,
            "question": guess.question,
            "waiting_on_you": bool(waiting),
            "guesses": waiting,
        },
    )


def push(event: Event) -> None:
    """Send one event and the sensors' states to Home Assistant, as every member of the memory
    may read them: an event about a fact some of them may not read (relabelled since it was
    recorded) is not sent. Raises httpx2.HTTPError."""
    if event.kind == Event.Kind.LEARNED and not _shared(event.memory, event.data.get("fact")):
        return
    everyone = visibility.household(event.memory)
    base = settings.HA_URL.rstrip("/")
    headers = {"Authorization": f"Bearer {settings.HA_TOKEN}"}
    with httpx2.Client(timeout=PUSH_TIMEOUT_S, headers=headers) as client:
        response = client.post(
            f"{base}/api/events/{event.kind}", json={"text": event.text, **event.data}
        )
        response.raise_for_status()
        for name, sensor in status.sensors(event.memory, reader=everyone).items():
            domain = "binary_sensor" if name == "memory_waiting_on_you" else "sensor"
            client.post(
                f"{base}/api/states/{domain}.brain_{name}",
                json={"state": sensor["state"], "attributes": sensor["attributes"]},
            ).raise_for_status()
    Event.objects.filter(pk=event.pk).update(pushed_at=timezone.now())
