"""Decay and pruning: what was said once and never used goes out of use (retired, never deleted,
still answerable as of an earlier time); what has been proven stays."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent import actions
from knowledge import actions as knowledge_actions
from knowledge import provenance, retrieval
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement

LONG_AGO = timedelta(days=120)


def _belief(home, text: str, *, seen_ago: timedelta = LONG_AGO, outcome: str = "ok") -> Fact:
    """A belief distilled from one episode seen ``seen_ago``."""
    actions.encode(memory=home, text=text, outcome=outcome, occurred_at=timezone.now() - seen_ago)
    actions.sleep(memory=home, tidy=False)
    return Fact.objects.get(text=text)


def test_decay_retires_a_stale_never_used_single_support_belief(home):
    stale = _belief(home, "The old build server is called Zephyr.")
    fresh = _belief(home, "The new build server is called Mistral.", seen_ago=timedelta(days=2))

    decayed = actions.decay(memory=home)

    stale.refresh_from_db()
    assert decayed.retired == [stale]
    assert stale.status == Fact.Status.RETIRED
    assert stale.valid_to is not None
    assert Fact.objects.filter(pk=fresh.pk).live().exists()
    assert decayed.message == (
        "Retired 1 belief nobody used or said again in 60 days (still answerable as of earlier)."
    )


def test_a_retired_belief_is_not_deleted_and_as_of_still_finds_it(home):
    stale = _belief(home, "The old build server is called Zephyr.")
    before = timezone.now()

    actions.decay(memory=home)

    assert not Fact.objects.live().filter(pk=stale.pk).exists()
    assert Fact.objects.as_of(before).filter(pk=stale.pk).exists()
    why = provenance.explain(Fact.objects.get(pk=stale.pk), reader=SYSTEM)
    assert why["believed"] is False
    assert why["why_not"].startswith("retired on ")
    assert "not used or said again in 60 days" in why["why_not"]


def test_high_support_or_proven_or_failed_beliefs_survive_decay(home):
    for _ in range(4):
        actions.encode(
            memory=home,
            text="Releases are tagged from main.",
            outcome="ok",
            occurred_at=timezone.now() - LONG_AGO,
        )
    actions.sleep(memory=home, tidy=False)
    used = _belief(home, "The linter runs in pre-commit.")
    knowledge_actions.record_outcome(fact=used, success=True)
    failure = _belief(home, "Force-pushing the release branch broke CI.", outcome="fail")

    decayed = actions.decay(memory=home)

    assert decayed.retired == []
    assert Fact.objects.live().count() == 3
    assert Fact.objects.get(pk=failure.pk).is_live
    assert decayed.message == "Nothing has gone stale."


def test_what_a_person_typed_never_decays(home, alice):
    typed = learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed", by=alice)
    ).fact
    Fact.objects.filter(pk=typed.pk).update(created_at=timezone.now() - LONG_AGO)
    typed.observations.update(created_at=timezone.now() - LONG_AGO)

    assert actions.decay(memory=home).retired == []


def test_searching_for_a_belief_does_not_keep_it_alive(home):
    stale = _belief(home, "The old build server is called Zephyr.")
    for _ in range(5):
        assert stale in retrieval.retrieve(
            memory=home, question="old build server", k=3, reader=SYSTEM
        )
        retrieval.context(memory=home, question="old build server Zephyr", reader=SYSTEM)

    assert actions.decay(memory=home).retired == [stale]


def _scored(home, text: str, *, successes: int, failures: int = 0, outcome: str = "ok") -> Fact:
    belief = _belief(home, text, seen_ago=timedelta(days=1), outcome=outcome)
    for _ in range(successes):
        belief = knowledge_actions.record_outcome(fact=belief, success=True)
    for _ in range(failures):
        belief = knowledge_actions.record_outcome(fact=belief, success=False)
    return belief


def test_prune_caps_outcome_scored_guidelines_retiring_the_least_useful(home):
    weak = _scored(home, "Retrying the flaky job once makes it pass.", successes=1, failures=3)
    middling = _scored(home, "Running the tests in parallel halves CI time.", successes=1)
    strong = _scored(home, "Pinning the base image keeps builds reproducible.", successes=3)

    pruned = actions.prune(memory=home, keep=2)

    assert pruned.retired == [weak]
    assert {f.pk for f in Fact.objects.live()} == {middling.pk, strong.pk}
    assert pruned.message == (
        "Kept the 2 most useful of 3 guidelines scored by outcomes; retired 1."
    )


def test_prune_protects_the_proven(home):
    proven = [
        _scored(home, f"Guideline {word} holds for the deploy.", successes=5)
        for word in ("alpha", "beta", "gamma")
    ]
    shaky = _scored(home, "Guideline delta holds for the deploy.", successes=1, failures=1)

    pruned = actions.prune(memory=home, keep=1)

    assert pruned.retired == [shaky]
    for belief in proven:
        belief.refresh_from_db()
        assert belief.is_live and belief.confidence >= 0.8 and belief.successes >= 5


def test_prune_keeps_failures_and_facts_in_their_own_classes(home):
    failure = _scored(
        home, "Skipping the migration check broke prod.", successes=0, failures=1, outcome="fail"
    )
    assert failure.valence == Fact.Valence.FAILURE
    for n in range(3):
        _scored(home, f"Build cache number {n} speeds up CI.", successes=2)

    actions.prune(memory=home, keep=2)

    assert Fact.objects.get(pk=failure.pk).is_live


def test_prune_leaves_beliefs_nobody_scored_alone(home):
    unscored = [_belief(home, f"Service {n} listens on port 80{n}.") for n in range(3)]

    assert actions.prune(memory=home, keep=1).retired == []
    assert all(Fact.objects.get(pk=b.pk).is_live for b in unscored)


def test_keep_must_be_a_sensible_number(home):
    with pytest.raises(ValidationError, match="keep must be between 1 and 1,000"):
        actions.prune(memory=home, keep=0)


def test_the_sleep_pass_decays_and_prunes_too(home):
    stale = _belief(home, "The old build server is called Zephyr.")

    slept = actions.sleep(memory=home)

    assert slept.decayed.retired == [stale]
    assert slept.pruned is not None


def test_the_facts_list_shows_retired_beliefs_as_retired_not_replaced(client, admin_user, home):
    stale = _belief(home, "The old build server is called Zephyr.")
    actions.decay(memory=home)
    client.force_login(admin_user)

    retired = client.get("/api/facts/?status=retired").json()["results"]
    replaced = client.get("/api/facts/?status=superseded").json()["results"]

    assert [fact["id"] for fact in retired] == [stale.pk]
    assert replaced == []
