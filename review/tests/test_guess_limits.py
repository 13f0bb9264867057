"""Guesses, within limits enforced in code: three open, a fortnight each, never asked again once
answered, however it is reworded; dismissed ones sleep and come back with a fresh fortnight."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from knowledge.models import Fact, Subject
from memory.models import InboxItem
from review import guesses as review_guesses
from review.models import GUESS_LIFETIME, Guess

FRIDGE = "The garage fridge is meant to run 24/7"


@pytest.fixture
def minilm(settings):
    """Meaning, not just words: the shipped MiniLM model compares the guesses."""
    settings.BRAIN_EMBEDDER = "minilm"


def _propose(home, text, **kwargs) -> Guess:
    proposed = review_guesses.propose_guess(memory=home, text=text, **kwargs)
    assert proposed.guess is not None, proposed.message
    return proposed.guess


def _three_open(home) -> list[Guess]:
    return [
        _propose(home, "The loft is used by guests"),
        _propose(home, "Sarah is a light sleeper"),
        _propose(home, "The dog is fed at 7 and 17"),
    ]


def _state(guess: Guess) -> str:
    guess.refresh_from_db()
    return guess.state


def _fortnight_from(when) -> tuple:
    minute = timedelta(minutes=1)
    return when + GUESS_LIFETIME - minute, when + GUESS_LIFETIME + minute


# Three open at a time -------------------------------------------------------------------------


def test_a_proposed_guess_is_open_for_a_fortnight_and_phrased_for_a_yes_or_no(home):
    guess = _propose(home, f"{FRIDGE} — right?")

    assert guess.state == Guess.State.OPEN
    assert guess.text == FRIDGE
    assert guess.question == f"{FRIDGE} — right?"
    low, high = _fortnight_from(timezone.now())
    assert low < guess.expires_at < high


def test_a_fourth_guess_waits_while_three_are_open(home):
    _three_open(home)

    fourth = review_guesses.propose_guess(memory=home, text=FRIDGE)

    assert fourth.guess.state == Guess.State.WAITING
    assert "waits for a free slot" in fourth.message
    assert Guess.objects.for_memory(home).open().count() == 3


def test_answering_one_offers_the_waiting_guess_with_a_fresh_fortnight(home):
    first, *_ = _three_open(home)
    fourth = _propose(home, FRIDGE)

    review_guesses.answer_guess(guess=first, answer="yes")

    fourth.refresh_from_db()
    assert fourth.state == Guess.State.OPEN
    low, high = _fortnight_from(timezone.now())
    assert low < fourth.expires_at < high
    assert Guess.objects.for_memory(home).open().count() == 3


def test_dismissing_one_offers_the_waiting_guess(home):
    first, *_ = _three_open(home)
    fourth = _propose(home, FRIDGE)

    review_guesses.dismiss_guess(guess=first)

    assert _state(fourth) == Guess.State.OPEN
    assert Guess.objects.for_memory(home).open().count() == 3


def test_waiting_guesses_are_offered_oldest_first(home):
    first, second, _ = _three_open(home)
    fourth = _propose(home, FRIDGE)
    fifth = _propose(home, "The hall sensor dropping offline briefly is normal")

    review_guesses.answer_guess(guess=first, answer="no")
    assert (_state(fourth), _state(fifth)) == (Guess.State.OPEN, Guess.State.WAITING)

    review_guesses.answer_guess(guess=second, answer="yes")
    assert _state(fifth) == Guess.State.OPEN


# A fortnight each -----------------------------------------------------------------------------


def test_an_unanswered_guess_expires_after_fourteen_days(home):
    guess = _propose(home, FRIDGE)

    review_guesses.tend_guesses(now=timezone.now() + timedelta(days=13))
    assert _state(guess) == Guess.State.OPEN

    review_guesses.tend_guesses(now=timezone.now() + timedelta(days=14, minutes=1))
    assert _state(guess) == Guess.State.EXPIRED
    assert Guess.objects.for_memory(home).open().count() == 0


def test_an_expiry_offers_the_waiting_guess_a_fortnight_from_then(home):
    _three_open(home)
    fourth = _propose(home, FRIDGE)
    later = timezone.now() + timedelta(days=15)

    review_guesses.tend_guesses(now=later)

    fourth.refresh_from_db()
    assert fourth.state == Guess.State.OPEN
    assert fourth.offered_at == later
    assert fourth.expires_at == later + GUESS_LIFETIME
    assert Guess.objects.for_memory(home).filter(state=Guess.State.EXPIRED).count() == 3

    review_guesses.tend_guesses(now=later + timedelta(days=13))  # still inside its own fortnight
    assert _state(fourth) == Guess.State.OPEN


# Dismiss puts it to sleep ---------------------------------------------------------------------


def test_a_dismissed_guess_sleeps_and_stops_counting(home):
    first, second, third = _three_open(home)

    slept = review_guesses.dismiss_guess(guess=first)

    assert slept.state == Guess.State.SLEEPING
    assert set(Guess.objects.for_memory(home).open()) == {second, third}
    assert _propose(home, FRIDGE).state == Guess.State.OPEN  # its slot is free for another


def test_a_sleeping_guess_does_not_expire_while_it_sleeps(home):
    guess = _propose(home, FRIDGE)
    review_guesses.dismiss_guess(guess=guess)
    Guess.objects.filter(pk=guess.pk).update(expires_at=timezone.now() - timedelta(days=1))

    Guess.objects.filter(pk=guess.pk).update(slept_at=timezone.now())  # still resting
    review_guesses.tend_guesses()

    assert _state(guess) == Guess.State.SLEEPING


def test_a_sleeping_guess_comes_back_after_its_rest_with_a_fresh_fortnight(home):
    guess = _propose(home, FRIDGE)
    review_guesses.dismiss_guess(guess=guess)

    review_guesses.tend_guesses(now=timezone.now() + timedelta(days=3))
    assert _state(guess) == Guess.State.SLEEPING  # still resting

    later = timezone.now() + timedelta(days=8)
    review_guesses.tend_guesses(now=later)

    guess.refresh_from_db()
    assert guess.state == Guess.State.OPEN
    assert guess.expires_at == later + GUESS_LIFETIME


def test_a_rested_guess_waits_until_a_slot_is_free(home):
    sleeper = _propose(home, FRIDGE)
    review_guesses.dismiss_guess(guess=sleeper)
    first, *_ = _three_open(home)
    Guess.objects.filter(pk=sleeper.pk).update(slept_at=timezone.now() - timedelta(days=8))

    review_guesses.tend_guesses()
    assert _state(sleeper) == Guess.State.SLEEPING  # three are open: no room

    review_guesses.answer_guess(guess=first, answer="yes")
    assert _state(sleeper) == Guess.State.OPEN


def test_a_dismissed_guess_can_still_be_answered(home):
    guess = _propose(home, FRIDGE)
    review_guesses.dismiss_guess(guess=guess)

    answered = review_guesses.answer_guess(guess=guess, answer="yes")

    assert answered.guess.state == Guess.State.CONFIRMED


def test_only_an_open_guess_can_be_dismissed(home):
    guess = _propose(home, FRIDGE)
    review_guesses.dismiss_guess(guess=guess)

    with pytest.raises(review_guesses.Refused, match="not open"):
        review_guesses.dismiss_guess(guess=guess)


# Never asked again, in any wording ------------------------------------------------------------


@pytest.mark.parametrize(
    "rewording",
    [
        "The fridge in the garage is supposed to run all the time",
        "Is the garage fridge meant to be on 24/7?",
        "The garage fridge is not meant to run 24/7",
        "the garage fridge is meant to run 24/7 — right?",
    ],
)
@pytest.mark.parametrize("answer", ["no", "yes"])
def test_an_answered_guess_is_never_asked_again_however_it_is_reworded(
    home, minilm, answer, rewording
):
    guess = _propose(home, FRIDGE)
    review_guesses.answer_guess(guess=guess, answer=answer)

    again = review_guesses.propose_guess(memory=home, text=rewording)

    assert again.guess is None
    assert "already" in again.message
    assert Guess.objects.for_memory(home).count() == 1


@pytest.mark.parametrize("embedder", ["hash", "minilm"])
def test_a_guess_rejected_as_a_statement_is_never_reopened_as_a_question(home, settings, embedder):
    settings.BRAIN_EMBEDDER = embedder
    guess = _propose(home, FRIDGE)
    review_guesses.answer_guess(guess=guess, answer="no")

    again = review_guesses.propose_guess(
        memory=home,
        text="Is the fridge in the garage supposed to be running around the clock?",
    )

    assert again.guess is None, again.message
    assert again.message == f"Not asked: it was already rejected (“{FRIDGE}”)."
    assert Guess.objects.for_memory(home).count() == 1


def test_a_pending_guess_is_not_asked_twice(home, minilm):
    _propose(home, FRIDGE)

    again = review_guesses.propose_guess(
        memory=home, text="Is the garage fridge meant to be on 24/7?"
    )

    assert again.guess is None
    assert "pending" in again.message


def test_a_genuinely_different_guess_is_asked(home, minilm):
    guess = _propose(home, FRIDGE)
    review_guesses.answer_guess(guess=guess, answer="no")

    for text in (
        "The garage freezer is switched off in winter",
        "The hall sensor dropping offline briefly is normal",
        "The garage fridge is meant to run in winter only",
    ):
        assert review_guesses.propose_guess(memory=home, text=text).guess is not None, text


def test_the_same_words_about_a_different_device_are_a_different_question(home, minilm):
    garage = Subject.objects.create(memory=home, kind="device", name="Garage fridge")
    kitchen = Subject.objects.create(memory=home, kind="device", name="Kitchen fridge")
    guess = _propose(home, FRIDGE, subject=garage)
    review_guesses.answer_guess(guess=guess, answer="no")

    other = review_guesses.propose_guess(
        memory=home, text="The kitchen fridge is meant to run 24/7", subject=kitchen
    )

    assert other.guess is not None, other.message


def test_an_expired_guess_may_be_asked_again(home):
    guess = _propose(home, FRIDGE)
    review_guesses.tend_guesses(now=timezone.now() + timedelta(days=15))
    assert _state(guess) == Guess.State.EXPIRED

    assert review_guesses.propose_guess(memory=home, text=FRIDGE).guess is not None


# Answers ----------------------------------------------------------------------------------


def test_yes_files_it_as_a_plain_fact(home, alice):
    guess = _propose(home, FRIDGE)

    answered = review_guesses.answer_guess(guess=guess, answer="Yes", by=alice)

    assert answered.guess.state == Guess.State.CONFIRMED
    assert answered.message == "Filed as known."
    fact = answered.guess.fact
    assert fact.text == FRIDGE
    assert fact.kind not in (Fact.Kind.JUDGEMENT, Fact.Kind.CORRECTION)
    assert fact.taught_by == alice
    assert fact in Fact.objects.for_memory(home).live()
    assert InboxItem.objects.get(fact=fact).text == FRIDGE
    assert Guess.objects.for_memory(home).open().count() == 0


def test_no_keeps_the_reason_as_a_correction_and_files_nothing_else(home, alice):
    guess = _propose(home, FRIDGE)

    answered = review_guesses.answer_guess(
        guess=guess, answer="No", reason="It is switched off in winter.", by=alice
    )

    assert answered.guess.state == Guess.State.REJECTED
    assert answered.guess.fact is None
    assert "correction" in answered.message
    (fact,) = Fact.objects.for_memory(home)
    assert fact.text == "It is switched off in winter."
    assert fact.kind == Fact.Kind.CORRECTION
    assert InboxItem.objects.for_memory(home).count() == 1


def test_a_no_with_its_reason_in_the_answer_keeps_the_reason(home):
    guess = _propose(home, FRIDGE)

    review_guesses.answer_guess(guess=guess, answer="no, it's off in winter")

    guess.refresh_from_db()
    assert guess.reason == "it's off in winter"
    assert Fact.objects.for_memory(home).get().kind == Fact.Kind.CORRECTION


def test_a_bare_no_files_nothing(home):
    guess = _propose(home, FRIDGE)

    answered = review_guesses.answer_guess(guess=guess, answer="no")

    assert answered.message == "Noted: brain won't ask that again."
    assert not Fact.objects.for_memory(home).exists()
    assert not InboxItem.objects.for_memory(home).exists()


@pytest.mark.parametrize("answer", ["maybe", "", "   ", "Not sure", "nothing to add", "yesterday"])
def test_an_answer_that_starts_with_neither_yes_nor_no_is_refused(home, answer):
    guess = _propose(home, FRIDGE)

    with pytest.raises(ValidationError, match="Start the answer with yes or no"):
        review_guesses.answer_guess(guess=guess, answer=answer)

    assert _state(guess) == Guess.State.OPEN
    assert not Fact.objects.for_memory(home).exists()


def test_a_guess_is_answered_once(home, alice, admin_user):
    guess = _propose(home, FRIDGE)
    review_guesses.answer_guess(guess=guess, answer="yes", by=alice)

    with pytest.raises(review_guesses.Refused, match="already confirmed by alice"):
        review_guesses.answer_guess(guess=guess, answer="no", by=admin_user)
