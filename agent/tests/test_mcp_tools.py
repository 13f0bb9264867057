"""The agent's own tools on `brain mcp`, over a real stdio subprocess: writes recorded as
episodes, the backlog, distilling it itself, and procedures."""

from __future__ import annotations

import pytest

from knowledge.models import Episode, Fact, Procedure
from memory.tests.test_mcp import Agent, drive

AGENT_TOOLS = {"memory_pending", "memory_distil", "memory_procedure"}


@pytest.mark.django_db(transaction=True)
def test_an_agent_distils_its_own_episodes_and_records_procedures(alice):
    seen: dict = {}

    async def scenario(agent: Agent, tools: dict) -> None:
        assert set(tools) >= AGENT_TOOLS
        assert set(tools["memory_distil"].input_schema["properties"]) == {
            "episode_ids",
            "propositions",
        }

        written = await agent.call("memory_write", content="Deploys take 20 minutes.", outcome=True)
        seen["written"] = written
        assert written["episode_id"]

        nothing = await agent.call("memory_pending")
        assert nothing == {"episodes": [], "waiting": 0}

        seen["refused"] = await agent.refused(
            "memory_distil", episode_ids=[999_999], propositions=["x happened."]
        )
        seen["bad procedure"] = await agent.refused(
            "memory_procedure", task="Deploy", steps=["push"], outcome="success"
        )

        recorded = await agent.call(
            "memory_procedure",
            task="Deploy the web app",
            steps=["build the image", "run the migrations", "restart the workers"],
            outcome="ok",
        )
        seen["procedure"] = recorded
        block = await agent.call("memory_context", goal="deploy the web app")
        seen["block"] = block["text"]

    drive(scenario, "--user", "alice")

    episode = Episode.objects.get()
    fact = Fact.objects.get()
    assert seen["written"]["episode_id"] == episode.pk
    assert fact.observations.get().episode == episode
    assert episode.distilled_at is not None
    assert "No waiting episode #999999" in seen["refused"]
    assert "ok, fail or unknown, not 'success'" in seen["bad procedure"]
    procedure = Procedure.objects.get()
    assert seen["procedure"]["ref"] == f"p{procedure.pk}"
    assert f"[p{procedure.pk}] Deploy the web app" in seen["block"]


@pytest.mark.django_db(transaction=True)
def test_an_agent_sees_its_backlog_and_an_empty_distillation_clears_it(home, alice):
    from agent import actions

    waiting = [
        actions.encode(memory=home, text=f"Build {n} passed on the first try.", outcome="ok")
        for n in range(2)
    ]
    seen: dict = {}

    async def scenario(agent: Agent, tools: dict) -> None:
        seen["pending"] = await agent.call("memory_pending")
        seen["distilled"] = await agent.call(
            "memory_distil",
            episode_ids=[e["id"] for e in seen["pending"]["episodes"]],
            propositions=[],
        )
        seen["after"] = await agent.call("memory_pending")

    drive(scenario, "--user", "alice")

    assert [e["id"] for e in seen["pending"]["episodes"]] == [e.episode.pk for e in waiting]
    assert seen["pending"]["episodes"][0]["outcome"] == "ok"
    assert seen["distilled"]["message"] == "Distilled 2 episodes into nothing worth keeping."
    assert seen["after"] == {"episodes": [], "waiting": 0}
    assert not Fact.objects.exists()
