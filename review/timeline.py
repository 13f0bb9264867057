"""The timeline: brain_learned and brain_finding events, recorded and — when Home Assistant is
configured (HA_URL, HA_TOKEN) — pushed to it as events and sensor states, after commit."""

from __future__ import annotations

import logging

import httpx2
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from review import status
from review.models import Event

logger = logging.getLogger(__name__)
PUSH_TIMEOUT_S = 10.0


def configured() -> bool:
    return bool(settings.HA_URL and settings.HA_TOKEN)


def push_after_commit(event: Event) -> None:
    if configured():
        from review.tasks import push_event

        transaction.on_commit(lambda: push_event.delay(event.pk))


def push(event: Event) -> None:
    """Send one event and the sensors' states to Home Assistant. Raises httpx2.HTTPError."""
    base = settings.HA_URL.rstrip("/")
    headers = {"Authorization": f"Bearer {settings.HA_TOKEN}"}
    with httpx2.Client(timeout=PUSH_TIMEOUT_S, headers=headers) as client:
        response = client.post(
            f"{base}/api/events/{event.kind}", json={"text": event.text, **event.data}
        )
        response.raise_for_status()
        for name, sensor in status.sensors(event.memory).items():
            domain = "binary_sensor" if name == "memory_waiting_on_you" else "sensor"
            client.post(
                f"{base}/api/states/{domain}.brain_{name}",
                json={"state": sensor["state"], "attributes": sensor["attributes"]},
            ).raise_for_status()
    Event.objects.filter(pk=event.pk).update(pushed_at=timezone.now())
