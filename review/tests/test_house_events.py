"""House events reach brain through POST /api/events/: an entity changed state, by hand or by an
automation, when and by whom. Checked whole before anything is kept, bounded, kept once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import Subject
from review import house_events
from review.models import HouseEvent

URL = "/api/events/"


@pytest.fixture
def hall_light(home) -> Subject:
    return Subject.objects.create(
        memory=home, kind="device", name="Hall light", entity_id="light.hall"
    )


def _event(**overrides) -> dict:
    event = {
        "entity_id": "light.hall",
        "state": "on",
        "from_state": "off",
        "cause": "by_hand",
        "who": "Sarah",
        "at": (timezone.now() - timedelta(hours=1)).isoformat(),
    }
    event.update(overrides)
    return event


def test_the_events_address_is_the_one_the_docs_name():
    assert reverse("review-api:events") == URL


def test_a_house_event_is_kept_with_its_time_who_and_what_it_is_about(signed_in, hall_light):
    at = timezone.now() - timedelta(minutes=30)

    response = signed_in.post(URL, _event(at=at.isoformat()), content_type="application/json")

    assert response.status_code == 201, response.json()
    assert response.json()["received"] == 1
    assert response.json()["detail"] == "Kept 1 event."
    kept = HouseEvent.objects.get(pk=response.json()["events"][0])
    assert (kept.entity_id, kept.state, kept.from_state, kept.cause, kept.who) == (
        "light.hall",
        "on",
        "off",
        "by_hand",
        "Sarah",
    )
    assert kept.at == at
    assert kept.subject == hall_light


def test_a_batch_is_kept_whole_and_listed_newest_first(signed_in, hall_light):
    now = timezone.now()
    batch = [
        _event(at=(now - timedelta(hours=3)).isoformat(), state="on"),
        _event(
            at=(now - timedelta(hours=2)).isoformat(),
            state="off",
            cause="automation",
            who="automation.lights_out",
        ),
    ]

    posted = signed_in.post(URL, {"events": batch}, content_type="application/json")
    listed = signed_in.get(URL)

    assert posted.status_code == 201
    assert posted.json()["received"] == 2
    assert [(e["state"], e["cause"]) for e in listed.json()["results"]] == [
        ("off", "automation"),
        ("on", "by_hand"),
    ]


def test_one_bad_event_keeps_none_of_the_batch_and_is_named(signed_in, home):
    batch = [_event(), _event(cause="the cat"), _event()]

    response = signed_in.post(URL, batch, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "Event 2: “cause” must be by_hand or automation, not 'the cat'."
    )
    assert not HouseEvent.objects.exists()


def test_an_event_sent_twice_is_kept_once(signed_in, home):
    first = signed_in.post(URL, _event(id="ctx-01"), content_type="application/json")
    again = signed_in.post(
        URL, [_event(id="ctx-01"), _event(id="ctx-02")], content_type="application/json"
    )

    assert first.json()["received"] == 1
    assert again.status_code == 201
    assert (again.json()["received"], again.json()["duplicates"]) == (1, 1)
    assert again.json()["detail"] == "Kept 1 event. 1 had been sent before and were kept once."
    assert HouseEvent.objects.count() == 2


def test_a_batch_over_the_limit_is_refused_naming_the_limit(signed_in, home):
    batch = [_event() for _ in range(house_events.BATCH_AT_MOST + 1)]

    response = signed_in.post(URL, {"events": batch}, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "501 events in one request; the limit is 500. Send them in smaller batches."
    )
    assert not HouseEvent.objects.exists()


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (
            _event(entity_id="hall light"),
            "The event: “entity_id” ('hall light') is not a Home "
            "Assistant entity id such as light.hall.",
        ),
        (
            {"state": "on", "cause": "by_hand", "at": "2026-11-30T06:10:00Z"},
            "The event: “entity_id” is required.",
        ),
        (_event(state=""), "The event: “state” is required."),
        (_event(state="x" * 101), "The event: “state” is 101 characters; the limit is 100."),
        (_event(at="yesterday"), "The event: “at” ('yesterday') is not an ISO 8601 time."),
        (
            _event(colour="blue"),
            "The event: unknown field 'colour'; an event has at, cause, "
            "entity_id, from_state, id, state, who.",
        ),
        (_event(state=["on"]), "The event: “state” must be text."),
        ([], "No events: send at least one."),
        (["light.hall on"], "The event: an event is an object with entity_id, state, cause, at."),
    ],
)
def test_bad_events_are_refused_with_the_problem_named(signed_in, home, event, detail):
    response = signed_in.post(URL, event, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"] == detail
    assert not HouseEvent.objects.exists()


def test_an_event_from_the_future_or_from_before_the_keeping_is_refused(signed_in, home):
    future = _event(at=(timezone.now() + timedelta(hours=1)).isoformat())
    ancient = _event(at=(timezone.now() - timedelta(days=61)).isoformat())

    assert (
        "is in the future"
        in signed_in.post(URL, future, content_type="application/json").json()["detail"]
    )
    assert signed_in.post(URL, ancient, content_type="application/json").json()["detail"] == (
        "The event: “at” is more than 60 days ago; events are kept 60 days."
    )


def test_posting_events_needs_permission_to_teach(client, django_user_model, home, settings):
    settings.BRAIN_DEFAULT_PERMISSION = "read"
    reader = django_user_model.objects.create_user(username="guest", password="x")
    client.force_login(reader)

    assert client.get(URL).status_code == 200
    assert client.post(URL, _event(), content_type="application/json").status_code == 403
    assert not HouseEvent.objects.exists()


def test_events_past_their_keeping_are_removed(home):
    now = timezone.now()
    house_events.record(memory=home, body=[_event(), _event()], now=now)
    HouseEvent.objects.filter(pk=HouseEvent.objects.first().pk).update(at=now - timedelta(days=61))

    assert house_events.remove_old(now=now) == 1
    assert HouseEvent.objects.count() == 1
