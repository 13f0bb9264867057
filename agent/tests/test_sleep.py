"""The sleep pass: waiting episodes distilled into beliefs through the same gate as every other
write, failures in their own class, validity from the first observation, nothing lost when the
extractor fails."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent import actions, tasks
from brain.tests.stubs.messages import stub_error, stub_json, stub_text
from knowledge import actions as knowledge_actions
from knowledge import provenance, retrieval
from knowledge.models import Episode, Fact, Memory
from knowledge.read_layer import SYSTEM

NFS = (
    "The NFS share needs the vers=4 mount option; the default mount hangs for a minute. "
    "It happened twice. Remounting that volume fixed the build. And then the build passed. "
    "The flaky integration tests."
)


def _texts() -> set[str]:
    return set(Fact.objects.live().values_list("text", flat=True))


def test_restating_never_moves_confidence(home):
    for _ in range(5):
        actions.encode(memory=home, text="The CI cache is cleared on Mondays.", outcome="ok")
    actions.sleep(memory=home)
    belief = Fact.objects.get()
    assert (belief.support, belief.confidence) == (5, 0.6)

    knowledge_actions.record_outcome(fact=belief, success=True)
    moved = Fact.objects.get().confidence
    for _ in range(3):
        actions.encode(memory=home, text="The CI cache is cleared on Mondays.", outcome="ok")
    actions.sleep(memory=home)

    belief.refresh_from_db()
    assert belief.support == 8
    assert belief.confidence == moved == pytest.approx(0.7333, abs=1e-4)


def test_a_belief_is_valid_from_the_first_observation_of_its_evidence(home):
    now = timezone.now()
    actions.encode(
        memory=home,
        text="The release branch is cut on Thursdays.",
        outcome="ok",
        occurred_at=now - timedelta(days=3),
    )
    actions.encode(  # recorded later, seen earlier
        memory=home,
        text="The release branch is cut on Thursdays.",
        outcome="ok",
        occurred_at=now - timedelta(days=10),
    )

    actions.sleep(memory=home)

    belief = Fact.objects.get()
    assert belief.valid_from == now - timedelta(days=10)
    assert belief.created_at >= now


def test_a_belief_cites_every_episode_it_came_from_in_explain(home):
    first = actions.encode(memory=home, text="Builds use the -O2 flag.", outcome="ok").episode
    second = actions.encode(memory=home, text="Builds use the -O2 flag.", outcome="ok").episode

    actions.sleep(memory=home)

    why = provenance.explain(Fact.objects.get(), reader=SYSTEM)
    assert why["episodes"] == [
        {
            "id": episode.pk,
            "text": "Builds use the -O2 flag.",
            "outcome": "ok",
            "occurred_at": episode.occurred_at.isoformat(),
        }
        for episode in (first, second)
    ]
    assert [o["episode"] for o in why["observations"]] == [first.pk, second.pk]


def test_a_failure_and_a_similar_success_both_stay_live(home):
    actions.encode(memory=home, text="Restarting the worker clears the stuck queue.", outcome="ok")
    actions.encode(
        memory=home, text="Restarting the worker does not clear the stuck queue.", outcome="fail"
    )
    actions.encode(memory=home, text="Deploying with the cache flag works.", outcome="ok")
    actions.encode(memory=home, text="Deploying with the cache flag works.", outcome="fail")

    actions.sleep(memory=home)

    live = Fact.objects.live()
    assert live.count() == 4
    assert set(live.filter(valence="failure").values_list("text", flat=True)) == {
        "Restarting the worker does not clear the stuck queue.",
        "Deploying with the cache flag works.",
    }
    block = retrieval.context(
        memory=home, question="restart the worker; deploy with the cache", reader=SYSTEM
    )
    failures, known = block.text.split("## What I know")
    assert "Avoid: Restarting the worker does not clear the stuck queue." in failures
    assert "Restarting the worker clears the stuck queue." in known


def test_offline_the_sleep_pass_keeps_only_claims_that_stand_alone(home):
    actions.encode(memory=home, text=NFS, outcome="ok")

    slept = actions.sleep(memory=home)

    assert _texts() == {
        "The NFS share needs the vers=4 mount option.",
        "The default mount hangs for a minute.",
    }
    assert set(slept.distilled.dropped) == {
        "It happened twice.",
        "Remounting that volume fixed the build.",
        "And then the build passed.",
        "The flaky integration tests.",
    }
    assert slept.distilled.message.startswith(
        "Distilled 1 episode into 2 new beliefs; 4 fragments did not stand alone and were left out"
    )


@pytest.mark.parametrize(
    "claim",
    [
        "This fixed the build.",
        "They rotate the logs at midnight.",
        "But the cron job never ran.",
        "Because the disk was full.",
        "Clearing those caches sped up the tests.",
        "Deleting that volume freed 20GB.",
        "A very long afternoon.",
        "The flaky integration tests.",
    ],
)
def test_offline_fragments_are_dropped(home, claim):
    actions.encode(memory=home, text=claim, outcome="ok")

    slept = actions.sleep(memory=home)

    assert not Fact.objects.exists()
    assert slept.distilled.dropped == [claim]
    assert actions.pending(memory=home) == []


@pytest.mark.parametrize(
    "claim",
    [
        "The log showed that the disk was full.",
        "The script that rotates logs runs at midnight.",
        "Deploys take 20 minutes.",
        "Validation of the 60MB CSV timed out.",
    ],
)
def test_offline_self_contained_claims_are_kept(home, claim):
    actions.encode(memory=home, text=claim, outcome="ok")

    actions.sleep(memory=home)

    assert _texts() == {claim}


def test_with_a_model_failures_are_distilled_under_their_own_prompt(home, llm_stub):
    failed = actions.encode(
        memory=home, text="Validation of the 60MB CSV timed out after 10 min.", outcome="fail"
    ).episode
    worked = actions.encode(
        memory=home, text="chunked it to 20MB, validation went through", outcome="ok"
    ).episode
    llm_stub.script(
        stub_json(
            {
                "propositions": [
                    {
                        "text": "Chunking a CSV to 20MB lets validation complete.",
                        "episodes": [worked.pk],
                    }
                ]
            }
        ),
        stub_json(
            {
                "propositions": [
                    {
                        "text": "Avoid: validating a 60MB CSV in one piece fails when it "
                        "exceeds the 10 minute limit.",
                        "episodes": [failed.pk],
                    }
                ]
            }
        ),
    )

    actions.sleep(memory=home)

    prompts = {request.system: request.prompt for request in llm_stub.requests}
    assert len(prompts) == 2
    failure_system = next(system for system in prompts if "Avoid: X fails when Y" in system)
    assert f"[{failed.pk}]" in prompts[failure_system]
    assert f"[{worked.pk}]" not in prompts[failure_system]
    assert (
        Fact.objects.get(valence="failure").text
        == "Validating a 60MB CSV in one piece fails when it exceeds the 10 minute limit."
    )
    fact = Fact.objects.get(valence="fact")
    assert fact.text == "Chunking a CSV to 20MB lets validation complete."
    assert fact.observations.get().episode == worked
    assert actions.pending(memory=home) == []


def test_an_extractor_failure_writes_nothing_and_loses_no_episode(home, llm_stub):
    actions.encode(memory=home, text="The deploy needs the VPN up.", outcome="ok")
    actions.encode(memory=home, text="Pushing to main without review broke prod.", outcome="fail")
    llm_stub.script(stub_error(529, "overloaded_error", "Overloaded"))

    slept = actions.sleep(memory=home)

    assert not Fact.objects.exists()
    assert len(actions.pending(memory=home)) == 2
    assert slept.distilled.error
    assert "nothing was written and 2 episodes still wait" in slept.distilled.message


def test_an_answer_that_is_not_propositions_is_an_extractor_failure_too(home, llm_stub):
    actions.encode(memory=home, text="The deploy needs the VPN up.", outcome="ok")
    llm_stub.script(stub_text("I could not find anything durable, sorry."))

    slept = actions.sleep(memory=home)

    assert slept.distilled.error
    assert not Fact.objects.exists()
    assert len(actions.pending(memory=home)) == 1


def test_distil_refuses_unknown_episode_ids_naming_them(home):
    known = actions.encode(memory=home, text="The deploy needs the VPN up.", outcome="ok").episode

    with pytest.raises(ValidationError) as refused:
        actions.distil(
            memory=home,
            episode_ids=[known.pk, 999_998, 999_999],
            propositions=["The deploy needs the VPN."],
        )

    assert refused.value.messages == [
        "No waiting episode #999998 or #999999 in Home: nothing was distilled."
    ]
    assert actions.pending(memory=home) == [known]
    assert not Fact.objects.exists()


def test_distil_learns_the_agent_s_propositions_citing_its_episodes(home):
    seen = timezone.now() - timedelta(days=1)
    one = actions.encode(
        memory=home, text="deploy hung, VPN was down", outcome="fail", occurred_at=seen
    ).episode
    two = actions.encode(
        memory=home, text="the nightly deploy timed out while the VPN reconnected", outcome="fail"
    ).episode

    distilled = actions.distil(
        memory=home,
        episode_ids=[one.pk, two.pk],
        propositions=["Avoid: deploying fails when the VPN is down."],
    )

    fact = Fact.objects.get()
    assert (fact.text, fact.valence, fact.valid_from) == (
        "Deploying fails when the VPN is down.",
        "failure",
        seen,
    )
    assert {o.episode_id for o in fact.observations.all()} == {one.pk, two.pk}
    assert actions.pending(memory=home) == []
    assert distilled.message == "Distilled 2 episodes into 1 new belief."


def test_an_empty_proposition_list_clears_the_backlog(home):
    ids = [
        actions.encode(memory=home, text=f"Build {n} passed.", outcome="ok").episode.pk
        for n in range(3)
    ]

    distilled = actions.distil(memory=home, episode_ids=ids, propositions=[])

    assert actions.pending(memory=home) == []
    assert not Fact.objects.exists()
    assert distilled.message == "Distilled 3 episodes into nothing worth keeping."


def test_an_episode_already_distilled_is_refused_by_distil(home):
    episode = actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok").episode
    actions.sleep(memory=home)

    with pytest.raises(ValidationError, match=re.escape(f"No waiting episode #{episode.pk}")):
        actions.distil(memory=home, episode_ids=[episode.pk], propositions=["Deploys are slow."])


def test_sleeping_twice_distils_nothing_twice(home):
    actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")
    actions.sleep(memory=home)

    again = actions.sleep(memory=home)

    assert Fact.objects.get().support == 1
    assert again.distilled.message == "Nothing was waiting to be distilled."
    assert Episode.objects.get().distilled_at is not None


def test_the_beat_asks_for_a_sleep_pass_in_every_memory(home, monkeypatch):
    other = Memory.objects.create(slug="agent", name="Agent")
    sent = []
    monkeypatch.setattr("agent.tasks.sleep.delay", sent.append)

    assert tasks.sleep_every_memory() == 2
    assert sorted(sent) == sorted([home.pk, other.pk])


def test_the_background_pass_distils_and_exits_when_its_memory_is_gone(home):
    actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")

    tasks.sleep(home.pk)
    tasks.sleep(999_999)

    assert Fact.objects.get().text == "Deploys take 20 minutes."
    assert actions.pending(memory=home) == []
