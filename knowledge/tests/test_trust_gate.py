"""The write gate keeps what it is told: it never retires a true fact, it merges what is said
twice in other words, it retires what was really replaced (with or without a cue word), keeps
both and asks when it is unsure, and keeps failures as failures."""

from __future__ import annotations

import pytest

from knowledge import provenance, retrieval
from knowledge.actions import record_outcome
from knowledge.models import Conflict, Fact
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement


def teach(home, text, by=None, **kwargs):
    return learn(Statement.typed(memory=home, text=text, origin="typed", by=by, **kwargs))


@pytest.fixture
def tom(django_user_model):
    return django_user_model.objects.create_user(username="tom", password="x")


@pytest.fixture
def sarah(django_user_model):
    return django_user_model.objects.create_user(username="sarah", password="x")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Priya's bus leaves at 7:50.", "Jonah's bus leaves at 8:20."),
        (
            "The payments API allows 60 calls a minute.",
            "The reports API allows 300 calls a minute.",
        ),
        ("The porch sensor's battery is at 15%.", "The attic sensor's battery is at 70%."),
        ("The tent is stored in the loft.", "The paddling pool is stored in the loft."),
        ("Room 3's radiator is set to 4.", "Room 5's radiator is set to 2."),
        ("The staging deploy takes 12 minutes.", "The production deploy takes 35 minutes."),
        (
            "The boiler measures 17 centimetres across.",
            "The chandelier measures 47 centimetres across.",
        ),
        (
            "Back in 1905 we repainted the doorbell green.",
            "Back in 1905 we repainted the bookcase green.",
        ),
    ],
)
def test_statements_about_different_subjects_that_share_a_template_both_stay_live(
    home, first, second
):
    a = teach(home, first)
    b = teach(home, second)
    assert b.verdict == "novel", b.reason
    assert Fact.objects.live().filter(pk__in=[a.fact.pk, b.fact.pk]).count() == 2


def test_two_people_s_own_preferences_are_both_kept(home, sarah, tom):
    hers = teach(home, "I like the living room at 20 degrees.", by=sarah)
    his = teach(home, "I like the living room at 22 degrees.", by=tom)
    assert his.verdict == "novel"
    assert Fact.objects.live().filter(pk__in=[hers.fact.pk, his.fact.pk]).count() == 2
    # The same person changing their mind is a contradiction.
    again = teach(home, "I like the living room at 21 degrees.", by=sarah)
    assert again.verdict == "contradiction"
    hers.fact.refresh_from_db()
    assert hers.fact.superseded_by == again.fact


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The chest freezer runs 24/7.", "The chest freezer runs around the clock."),
        (
            "The greenhouse heater is set to twelve degrees.",
            "The greenhouse heater is set to 12°C.",
        ),
        ("Dana maintains the billing service.", "The billing service is maintained by Dana."),
    ],
)
def test_a_paraphrase_only_raises_support_and_is_recorded_as_its_own_observation(
    home, sarah, tom, first, second
):
    taught = teach(home, first, by=sarah)
    again = teach(home, second, by=tom)
    assert again.verdict == "same", again.reason
    assert again.fact == taught.fact
    assert again.fact.support == 2
    observations = provenance.explain(again.fact, reader=SYSTEM)["observations"]
    assert [(o["kind"], o["said_by"], o["text"]) for o in observations] == [
        ("taught", "sarah", first),
        ("restated", "tom", second),
    ]
    assert all(o["source"] for o in observations)
    assert provenance.explain(again.fact, reader=SYSTEM)["taught_by"] == "sarah"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Lena runs the hiring pipeline.", "Omar has taken over the hiring pipeline from Lena."),
        ("The importer accepts tab-separated files.", "The importer rejects tab-separated files."),
        (
            "The snug means the small room at the front, not the study at the back.",
            "The snug means the study at the back.",
        ),
        ("The back gate is locked at night.", "The back gate is unlocked at night."),
    ],
)
def test_a_contradiction_without_a_cue_word_retires_the_old_fact(home, first, second):
    old = teach(home, first)
    new = teach(home, second)
    assert new.verdict == "contradiction", new.reason
    old.fact.refresh_from_db()
    assert old.fact.superseded_by == new.fact
    assert not old.fact.is_live


def test_when_the_gate_is_unsure_both_stay_live_and_a_conflict_is_opened(home):
    old = teach(home, "The spare keys are kept in the blue bowl.")
    new = teach(home, "The spare keys are kept in the kitchen drawer.")
    assert new.verdict == "conflict"
    conflict = Conflict.objects.get()
    assert (conflict.old, conflict.new, conflict.state) == (old.fact, new.fact, "open")
    assert Fact.objects.live().filter(pk__in=[old.fact.pk, new.fact.pk]).count() == 2
    assert "To settle" in new.message


def test_a_statement_that_failed_after_it_was_said_to_work_is_stored_as_a_failure(home):
    worked = teach(home, "Rebooting the hub fixes the frozen blinds.")
    failed = teach(home, "Rebooting the hub fixes the frozen blinds.", outcome=False)
    assert failed.verdict == "different_outcome"
    assert failed.fact != worked.fact
    assert failed.fact.valence == Fact.Valence.FAILURE
    assert "Stored as a failure" in failed.message
    assert f"#{worked.fact.pk}" in failed.message
    block = retrieval.context(memory=home, question="frozen blinds hub", reader=SYSTEM).text
    assert f"[{failed.fact.pk}] Avoid: Rebooting the hub" in block


def test_a_belief_proven_by_outcomes_outranks_one_merely_repeated(home):
    repeated = teach(home, "The side door sticks in wet weather.")
    for _ in range(9):
        teach(home, "The side door sticks in wet weather.")
    proven = teach(home, "Lifting the handle frees the side door.")
    for _ in range(9):
        record_outcome(fact=proven.fact, success=True)
    repeated.fact.refresh_from_db()
    assert repeated.fact.support == 10
    assert repeated.fact.confidence == pytest.approx(0.6)  # restatement is not evidence
    ranked = retrieval.retrieve(memory=home, question="side door", k=2, reader=SYSTEM)
    assert ranked[0] == proven.fact


def test_a_failure_taught_with_its_own_avoid_label_is_recalled_with_one_label(home):
    failed = teach(home, "Avoid: running the dryer and the oven together.", outcome=False)
    block = retrieval.context(memory=home, question="dryer oven", reader=SYSTEM).text
    assert f"[{failed.fact.pk}] Avoid: running the dryer" in block
    assert "Avoid: Avoid" not in block
