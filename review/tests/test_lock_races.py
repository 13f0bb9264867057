"""Findings and guesses lock their memory the way the document does (NO KEY UPDATE), so a fact
taught at the same moment is never held up by them, and each write runs again after losing a
lock race instead of failing."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from knowledge.models import Fact, Memory
from memory import actions as memory_actions
from memory.models import InboxItem, Origin
from review import findings as review_findings
from review import guesses as review_guesses
from review import timeline
from review.models import Finding, Guess


@pytest.fixture
def home(transactional_db) -> Memory:
    """Writes commit for real: a retry only happens outside any outer transaction."""
    return Memory.objects.default()


def test_a_finding_raised_through_a_lost_race_is_raised_once(home, races):
    calls = races(timeline, "record")

    raised = review_findings.raise_finding(
        memory=home, check_id="fridge_door", text="The fridge door is open.", severity="medium"
    )

    assert len(calls) == 2
    assert raised.outcome == "new"
    assert Finding.objects.get().times_raised == 1


def test_a_guess_proposed_through_a_lost_race_is_asked_once(home, races):
    calls = races(review_guesses, "_offer_waiting")

    proposed = review_guesses.propose_guess(memory=home, text="Does Sarah get up at 6?")

    assert len(calls) == 2
    assert proposed.message == "Asked."
    assert Guess.objects.get().state == Guess.State.OPEN


def test_a_yes_through_a_lost_race_files_the_guess_once(home, races):
    guess = review_guesses.propose_guess(memory=home, text="Does Sarah get up at 6?").guess
    calls = races(review_guesses, "_offer_waiting")

    answered = review_guesses.answer_guess(guess=guess, answer="yes")

    assert len(calls) == 2
    assert answered.guess.state == Guess.State.CONFIRMED
    assert Fact.objects.filter(text="Does Sarah get up at 6").count() == 1
    assert InboxItem.objects.count() == 1


def test_a_guess_put_to_sleep_through_a_lost_race_sleeps(home, races):
    guess = review_guesses.propose_guess(memory=home, text="Does Sarah get up at 6?").guess
    calls = races(review_guesses, "_offer_waiting")

    slept = review_guesses.dismiss_guess(guess=guess)

    assert len(calls) == 2
    assert slept.state == Guess.State.SLEEPING


def test_tending_guesses_through_a_lost_race_fills_the_slots(home, races):
    for text in ("Is the loft used?", "Does Sarah get up at 6?", "Is the cellar damp?"):
        review_guesses.propose_guess(memory=home, text=text)
    fourth = review_guesses.propose_guess(memory=home, text="Does the dog sleep inside?").guess
    Guess.objects.filter(text="Is the loft used").update(state=Guess.State.EXPIRED)
    calls = races(review_guesses, "_offer_waiting")

    review_guesses.tend_guesses()

    assert len(calls) == 2
    fourth.refresh_from_db()
    assert fourth.state == Guess.State.OPEN


def test_raising_a_finding_does_not_hold_up_a_fact_taught_at_the_same_moment(home, monkeypatch):
    locked, go_on, errors = threading.Event(), threading.Event(), []
    event = timeline.record

    def event_then_wait(*args, **kwargs):
        created = event(*args, **kwargs)
        locked.set()  # the finding's lock on the memory is held until it commits
        go_on.wait(timeout=30)
        return created

    monkeypatch.setattr(timeline, "record", event_then_wait)

    def raise_one() -> None:
        try:
            review_findings.raise_finding(
                memory=home, check_id="fridge_door", text="The fridge door is open.", severity="low"
            )
        except Exception as error:  # reported by the assertion below
            errors.append(error)
        finally:
            connection.close()

    raising = threading.Thread(target=raise_one)
    raising.start()
    try:
        assert locked.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            memory_actions.add_to_inbox(
                memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED
            )
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    finally:
        go_on.set()
        raising.join(timeout=30)

    assert errors == []
    assert Finding.objects.count() == 1
    assert InboxItem.objects.filter(text="Sarah is a light sleeper.").exists()
