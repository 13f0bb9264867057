"""`brain memory hypotheses | confirm N | reject N --reason …`: guesses answered from the
terminal exactly as the Findings tab's buttons answer them."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Fact, Membership, Permission
from review import guesses
from review.models import Guess


def brain(*args: str) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _guess(home, text: str) -> Guess:
    return guesses.propose_guess(memory=home, text=text).guess


def test_hypotheses_lists_open_sleeping_confirmed_and_rejected_guesses(home):
    fridge = _guess(home, "The garage fridge is meant to run 24/7")
    cat = _guess(home, "Night motion on the landing is the cat")
    lamp = _guess(home, "The office lamp is a night light")
    loft = _guess(home, "Guests sleep in the loft")  # a fourth waits for a slot
    guesses.answer_guess(guess=fridge, answer="yes")
    guesses.answer_guess(guess=cat, answer="no", reason="We have no cat")
    guesses.dismiss_guess(guess=lamp)

    listed = brain("hypotheses")

    order = [
        "Open, waiting on a yes or a no:",
        f"  #{loft.pk}  Guests sleep in the loft — right?",
        "Sleeping (dismissed for now",
        f"  #{lamp.pk}  The office lamp is a night light — right?",
        "Confirmed:",
        f"  #{fridge.pk}  The garage fridge is meant to run 24/7 — right?",
        "Rejected (never asked again, in any wording):",
        f"  #{cat.pk}  Night motion on the landing is the cat — right?",
        "1 waiting on you",
    ]
    positions = [listed.index(line) for line in order]
    assert positions == sorted(positions)
    assert ": We have no cat)" in listed


def test_confirm_files_the_guess_as_known_as_the_yes_button_does(home, admin_user):
    fridge = _guess(home, "The garage fridge is meant to run 24/7")

    said = brain("--as", admin_user.username, "confirm", str(fridge.pk))

    fridge.refresh_from_db()
    assert said == "“The garage fridge is meant to run 24/7”: Filed as known.\n"
    assert fridge.state == Guess.State.CONFIRMED and fridge.answered_by == admin_user
    assert Fact.objects.get(pk=fridge.fact_id).text == "The garage fridge is meant to run 24/7"


def test_reject_with_a_reason_keeps_it_as_a_correction_and_never_asks_again(home):
    cat = _guess(home, "Night motion on the landing is the cat")

    said = brain("reject", str(cat.pk), "--reason", "We have no cat, it is the dog")

    cat.refresh_from_db()
    assert "brain won't ask that again. Your reason is kept as a correction." in said
    assert cat.state == Guess.State.REJECTED and cat.reason == "We have no cat, it is the dog"
    assert Fact.objects.filter(kind="correction", text__startswith="We have no cat").exists()
    again = guesses.propose_guess(memory=home, text="Is the night motion on the landing the cat?")
    assert again.guess is None


def test_answering_twice_or_an_unknown_guess_is_refused_in_one_line(home):
    fridge = _guess(home, "The garage fridge is meant to run 24/7")
    brain("confirm", str(fridge.pk))

    with pytest.raises(CommandError, match="That guess was already confirmed"):
        brain("reject", str(fridge.pk))
    with pytest.raises(CommandError, match=r"There is no guess #999999 in Home\."):
        brain("confirm", "999999")


def test_a_reader_may_list_guesses_but_not_answer_them(home, alice):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    fridge = _guess(home, "The garage fridge is meant to run 24/7")

    assert f"#{fridge.pk}" in brain("--as", "alice", "hypotheses")
    with pytest.raises(CommandError, match="teach"):
        brain("--as", "alice", "confirm", str(fridge.pk))
    fridge.refresh_from_db()
    assert fridge.state == Guess.State.OPEN
