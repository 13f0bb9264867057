"""Episodes: the append-only log of what an agent saw happen, with a closed outcome vocabulary,
compared by the write gate before any sleep pass has run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agent import actions
from knowledge.models import Episode, Fact
from memory.actions import learn
from memory.taught import Statement

DEPLOY = "The staging deploy takes 20 minutes."


@pytest.mark.parametrize("word", ["failure", "success", "FAIL", "failed", "yes", True, 0])
def test_an_outcome_outside_ok_fail_and_unknown_is_refused_not_coerced(home, word):
    with pytest.raises(ValidationError) as refused:
        actions.encode(memory=home, text="Validation of the 60MB CSV timed out.", outcome=word)

    assert f"outcome must be one of ok, fail or unknown, not {word!r}." in refused.value.messages
    assert not Episode.objects.exists()


def test_the_database_keeps_the_outcome_vocabulary_closed_too(home):
    with pytest.raises(IntegrityError), transaction.atomic():
        Episode.objects.create(memory=home, text="x", normalized="x", outcome="failure")


def test_an_episode_keeps_its_outcome_and_time_and_waits_for_the_sleep_pass(home, alice):
    when = timezone.now() - timedelta(hours=3)

    encoded = actions.encode(
        memory=home,
        text="Validation of the 60MB CSV timed out.",
        outcome="fail",
        by=alice,
        occurred_at=when,
    )

    episode = encoded.episode
    assert (episode.outcome, episode.occurred_at) == ("fail", when)
    assert episode.recorded_by_name == "alice"
    assert actions.pending(memory=home) == [episode]
    assert encoded.message == (
        f"Recorded episode #{episode.pk} (fail); it waits for the sleep pass to be distilled."
    )
    assert not Fact.objects.exists()


def test_an_unknown_outcome_is_the_default(home):
    assert actions.encode(memory=home, text=DEPLOY).episode.outcome == "unknown"


def test_an_empty_or_secret_episode_is_refused(home):
    with pytest.raises(ValidationError, match="can't be empty"):
        actions.encode(memory=home, text="   ", outcome="ok")
    with pytest.raises(ValidationError, match="looks like a password"):
        actions.encode(memory=home, text="The wifi password is hunter22", outcome="ok")
    assert not Episode.objects.exists()


def test_a_duplicate_of_a_waiting_episode_is_caught_before_any_sleep_pass(home):
    first = actions.encode(
        memory=home, text="The staging deploy takes twenty minutes.", outcome="ok"
    )

    again = actions.encode(memory=home, text=DEPLOY, outcome="ok")

    assert again.restates == first.episode
    assert actions.pending(memory=home) == [first.episode]
    assert again.message == (
        f"Recorded episode #{again.episode.pk}; it says what episode #{first.episode.pk} says, "
        "which is still waiting: they are distilled together."
    )
    actions.sleep(memory=home)
    belief = Fact.objects.get()
    assert belief.support == 2
    assert {o.episode_id for o in belief.observations.all()} == {
        first.episode.pk,
        again.episode.pk,
    }


def test_the_same_words_with_another_outcome_are_not_a_duplicate(home):
    actions.encode(memory=home, text="Restarting the worker clears the stuck queue.", outcome="ok")

    failed = actions.encode(
        memory=home, text="Restarting the worker clears the stuck queue.", outcome="fail"
    )

    assert failed.restates is None
    assert len(actions.pending(memory=home)) == 2


def test_an_episode_that_a_belief_already_states_strengthens_it_at_once(home):
    belief = learn(Statement.typed(memory=home, text=DEPLOY, origin="typed")).fact

    encoded = actions.encode(memory=home, text=DEPLOY, outcome="ok")

    belief.refresh_from_db()
    assert encoded.known == belief
    assert (belief.support, belief.confidence) == (2, 0.6)
    assert actions.pending(memory=home) == []
    assert belief.observations.filter(episode=encoded.episode).exists()
    assert encoded.message == (
        f"Already known (fact #{belief.pk}, now said 2 times); episode #{encoded.episode.pk} "
        "is cited by it."
    )


def test_teaching_what_a_waiting_episode_says_distils_that_episode_into_the_belief(home, alice):
    seen = timezone.now() - timedelta(days=2)
    waiting = actions.encode(
        memory=home, text="Backups run at 02:00 every night.", outcome="ok", occurred_at=seen
    ).episode

    learned = learn(
        Statement.typed(
            memory=home, text="Backups run at 02:00 every night.", origin="api", by=alice
        )
    )

    assert actions.pending(memory=home) == []
    assert learned.fact.support == 2
    assert learned.fact.valid_from == seen
    assert learned.fact.observations.filter(episode=waiting).exists()
    actions.sleep(memory=home)
    assert Fact.objects.count() == 1


def test_episodes_are_never_changed_by_distilling_them(home):
    episode = actions.encode(memory=home, text=DEPLOY, outcome="ok").episode
    before = (episode.text, episode.outcome, episode.occurred_at)

    actions.sleep(memory=home)

    episode.refresh_from_db()
    assert (episode.text, episode.outcome, episode.occurred_at) == before
    assert episode.distilled_at is not None
