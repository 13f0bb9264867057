"""Learning off means nothing is learned, the agent's paths included: memory_write, episodes,
the agent's own distillation and the sleep pass refuse or do nothing and say why, through the
one switch (memory/switches.py); what is known is still used."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from agent import actions
from knowledge.models import Episode, Fact, Memory
from memory.switches import LearningOff
from memory.taught import Statement
from memory.tests.test_mcp import Agent, drive


def _off(memory: Memory) -> None:
    Memory.objects.filter(pk=memory.pk).update(learning=False)
    memory.refresh_from_db()


@pytest.fixture
def token(alice) -> str:
    return Token.objects.create(user=alice).key


def test_an_episode_is_not_recorded_while_learning_is_off(client, home, token):
    _off(home)

    response = client.post(
        "/api/episodes/",
        {"text": "Deploys take 20 minutes.", "outcome": "ok"},
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )

    assert response.status_code == 409
    assert response.json()["detail"].startswith("Learning is switched off for Home")
    assert not Episode.objects.exists() and not Fact.objects.exists()


def test_the_sleep_pass_distils_and_retires_nothing_while_learning_is_off(home):
    waiting = actions.encode(memory=home, text="The deploy hung on the migrations.", outcome="fail")
    _off(home)

    slept = actions.sleep(memory=home)

    assert "Learning is switched off" in slept.message
    waiting.episode.refresh_from_db()
    assert waiting.episode.distilled_at is None
    assert not Fact.objects.exists()


def test_the_agents_own_distillation_is_refused_while_learning_is_off(home):
    waiting = actions.encode(memory=home, text="The deploy hung on the migrations.", outcome="fail")
    _off(home)

    with pytest.raises(LearningOff):
        actions.distil(
            memory=home,
            episode_ids=[waiting.episode.pk],
            propositions=["Avoid: deploying while migrations run."],
        )

    waiting.episode.refresh_from_db()
    assert waiting.episode.distilled_at is None and not Fact.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_memory_write_is_refused_while_learning_is_off_and_search_still_answers(alice):
    from knowledge.models import Memory as Memories
    from memory.actions import learn

    home = Memories.objects.default()
    known = learn(
        Statement.typed(memory=home, text="Deploys take 20 minutes.", origin="typed")
    ).fact
    _off(home)
    seen: dict = {}

    async def scenario(agent: Agent, tools: dict) -> None:
        seen["write"] = await agent.refused("memory_write", content="The build takes 9 minutes.")
        seen["distil"] = await agent.refused(
            "memory_distil", episode_ids=[1], propositions=["Builds are slow."]
        )
        seen["search"] = await agent.call("memory_search", query="how long do deploys take")

    drive(scenario, "--user", "alice")

    assert "Learning is switched off" in seen["write"]
    assert "Learning is switched off" in seen["distil"]
    assert not Episode.objects.exists()
    assert list(Fact.objects.values_list("pk", flat=True)) == [known.pk]
    assert str(known.pk) in str(seen["search"])
