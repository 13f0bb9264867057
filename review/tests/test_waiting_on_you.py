"""waiting_on_you is pushed whenever a guess opens, is answered, sleeps, wakes or expires — a
timeline event carrying the open guesses and their ids, and the status API saying the same."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.celery import app as celery_app
from review import guesses, tasks, timeline
from review.models import GUESS_LIFETIME, Event, Guess


@pytest.fixture
def pushed(monkeypatch, settings) -> list[int]:
    """Home Assistant configured; the events whose push was sent, instead of a broker."""
    settings.HA_URL, settings.HA_TOKEN = "http://ha.invalid/", "token"
    sent: list[int] = []
    monkeypatch.setattr(celery_app, "send_task", lambda name, args: sent.extend(args))
    return sent


def _waiting() -> list[Event]:
    return list(Event.objects.filter(kind=Event.Kind.WAITING).order_by("pk"))


def _ask(home, text: str) -> Guess:
    return guesses.propose_guess(memory=home, text=text).guess


def test_a_guess_that_opens_is_an_event_with_the_open_guesses_and_their_ids(
    home, pushed, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        fridge = _ask(home, "The garage fridge is meant to run 24/7")
        cat = _ask(home, "Night motion on the landing is the cat")

    first, second = _waiting()
    assert first.text == (
        "Waiting on you: “The garage fridge is meant to run 24/7 — right?” (1 waits on you)"
    )
    assert second.data == {
        "change": "opened",
        "guess": cat.pk,
        "question": cat.question,
        "waiting_on_you": True,
        "guesses": [
            {"id": fridge.pk, "question": fridge.question},
            {"id": cat.pk, "question": cat.question},
        ],
    }
    assert pushed == [first.pk, second.pk]  # each goes to Home Assistant after commit


def test_answering_sleeping_and_waking_each_say_what_waits_now(home):
    fridge = _ask(home, "The garage fridge is meant to run 24/7")
    cat = _ask(home, "Night motion on the landing is the cat")
    lamp = _ask(home, "The office lamp is a night light")
    loft = _ask(home, "Guests sleep in the loft")  # waits for a slot
    Event.objects.all().delete()

    guesses.answer_guess(guess=fridge, answer="yes")  # loft takes the free slot
    guesses.answer_guess(guess=cat, answer="no")
    guesses.dismiss_guess(guess=lamp)
    Guess.objects.filter(pk=lamp.pk).update(slept_at=timezone.now() - guesses.SLEEP_FOR)
    guesses.tend_guesses()  # the lamp has rested: it wakes into a free slot

    assert [(e.data["change"], e.data["guess"]) for e in _waiting()] == [
        ("confirmed", fridge.pk),
        ("opened", loft.pk),
        ("rejected", cat.pk),
        ("slept", lamp.pk),
        ("woke", lamp.pk),
    ]
    last = _waiting()[-1]
    assert last.text.startswith("Back, waiting on you: “The office lamp is a night light")
    assert [g["id"] for g in last.data["guesses"]] == [loft.pk, lamp.pk]


def test_a_guess_past_its_fortnight_expires_and_says_nothing_waits(home):
    fridge = _ask(home, "The garage fridge is meant to run 24/7")
    Event.objects.all().delete()

    guesses.tend_guesses(now=timezone.now() + GUESS_LIFETIME + timedelta(minutes=1))

    [expired] = _waiting()
    assert expired.data["change"] == "expired" and expired.data["guess"] == fridge.pk
    assert expired.data["waiting_on_you"] is False and expired.data["guesses"] == []
    assert expired.text.endswith("(nothing waits on you)")
    guesses.tend_guesses(now=timezone.now() + GUESS_LIFETIME + timedelta(minutes=2))
    assert len(_waiting()) == 1  # expired once


def test_the_status_api_shows_the_open_guesses_with_their_ids(api_client, home):
    fridge = _ask(home, "The garage fridge is meant to run 24/7")

    sensors = api_client.get("/api/status/").json()

    assert sensors["memory_waiting_on_you"] == {
        "state": "on",
        "attributes": {"guesses": [{"id": fridge.pk, "question": fridge.question}]},
    }


def test_the_event_pushed_is_named_for_the_binary_sensor(home, monkeypatch, settings):
    settings.HA_URL, settings.HA_TOKEN = "http://ha.invalid/", "token"
    _ask(home, "The garage fridge is meant to run 24/7")
    event = _waiting()[0]
    posted = []

    class Client:
        def __init__(self, **_):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *_):
            return False

        def post(self, url, json):
            posted.append((url, json))
            return type("Answer", (), {"raise_for_status": lambda self: None})()

    monkeypatch.setattr(timeline.httpx2, "Client", Client)
    tasks.push_event(event.pk)

    assert posted[0][0] == "http://ha.invalid/api/events/brain_waiting_on_you"
    assert posted[0][1]["guesses"][0]["question"].endswith("— right?")
    assert ("http://ha.invalid/api/states/binary_sensor.brain_memory_waiting_on_you") in [
        url for url, _ in posted
    ]


@pytest.fixture
def api_client(client, admin_user):
    client.force_login(admin_user)
    return client
