"""`brain mcp`: the real server in its own process, driven over stdio by the SDK's own client."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import anyio
import pytest
from django.conf import settings as django_settings
from django.db import connection
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from brain.testing import database_url, run_async
from knowledge.models import Fact
from memory.models import InboxItem

FAILURE = "Validation of the 60MB CSV timed out."
LESSON = "Chunking the CSV to 20MB completed validation."
TOOLS = {
    "memory_search",
    "memory_context",
    "memory_write",
    "memory_outcome",
    "memory_explain",
    "memory_status",
    # The agent app's, served beside them (surfaces.mcp_server; agent/tests/test_mcp_tools.py).
    "memory_pending",
    "memory_distil",
    "memory_procedure",
}


def _server(*args: str) -> StdioServerParameters:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "BRAIN_EMBEDDER": "hash",
    }
    # The test suite allows sync ORM calls inside event loops; the server must not need that.
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", *args],
        env=env,
        cwd=str(django_settings.BASE_DIR),
    )


class Agent:
    """One client session; ``call`` returns the structured result, ``refused`` the error text."""

    def __init__(self, session: ClientSession):
        self.session = session

    async def call(self, tool: str, **arguments) -> dict:
        result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async def refused(self, tool: str, **arguments) -> str:
        result = await self.session.call_tool(tool, arguments)
        assert result.is_error, result.structured_content
        return result.content[0].text


def drive(scenario, *server_args: str) -> str:
    """Run ``scenario(agent, tools)`` against a fresh server; returns what it logged."""

    async def main() -> None:
        with anyio.fail_after(30):
            async with (
                stdio_client(_server(*server_args), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                await scenario(Agent(session), {tool.name: tool for tool in listed.tools})

    with tempfile.TemporaryFile("w+") as errlog:
        try:
            run_async(main)
        finally:
            errlog.seek(0)
            logged = errlog.read()
            sys.stderr.write(logged)  # shown by pytest when the test fails
    return logged


@pytest.mark.django_db(transaction=True)
def test_an_agent_teaches_recalls_and_reports_outcomes_through_the_mcp_server(alice):
    seen: dict = {}

    async def scenario(agent: Agent, tools: dict) -> None:
        assert set(tools) == TOOLS
        assert all(tool.output_schema for tool in tools.values())
        assert set(tools["memory_write"].input_schema["properties"]) == {
            "content",
            "outcome",
            "verdict",
            "target",
            "confidence",
        }

        failed = await agent.call("memory_write", content=FAILURE, outcome=False)
        assert failed["verdict"] == "novel" and failed["queued"]
        assert failed["message"] == f"Queued #{failed['inbox_item_id']}: {FAILURE}"
        lesson = await agent.call("memory_write", content=LESSON, outcome=True)
        assert lesson["verdict"] == "novel" and lesson["queued"]
        again = await agent.call("memory_write", content=LESSON, outcome=True)
        assert again["verdict"] == "same"
        assert again["fact_id"] == lesson["fact_id"]
        assert (again["queued"], again["inbox_item_id"], again["support"]) == (False, None, 2)
        assert again["message"].startswith(f"Already known (fact #{lesson['fact_id']}")

        found = await agent.call("memory_search", query="CSV validation", k=3)
        by_id = {fact["id"]: fact for fact in found["facts"]}
        assert set(by_id) == {failed["fact_id"], lesson["fact_id"]}
        assert by_id[failed["fact_id"]]["valence"] == "failure"
        assert by_id[lesson["fact_id"]] == {
            "id": lesson["fact_id"],
            "text": LESSON,
            "kind": "note",
            "valence": "fact",
            "confidence": 0.6,
            "support": 2,
        }

        block = await agent.call("memory_context", goal="run the validation batch")
        text = block["text"]
        failure_line = f"- [{failed['fact_id']}] Avoid: {FAILURE}"
        assert "## What has gone wrong before\n" + failure_line in text
        assert f"- [{lesson['fact_id']}] {LESSON}" in text
        assert text.index("What has gone wrong before") < text.index("## What I know")
        assert block["fact_ids"] == [failed["fact_id"], lesson["fact_id"]]

        moved = await agent.call("memory_outcome", fact_id=lesson["fact_id"], success=True)
        assert moved["previous_confidence"] == 0.6
        assert moved["confidence"] == pytest.approx(0.7333, abs=1e-4)
        assert (moved["successes"], moved["failures"]) == (1, 0)

        why = await agent.call("memory_explain", fact_id=lesson["fact_id"])
        assert (why["taught_by"], why["channel"], why["believed"]) == ("alice", "api", True)
        assert why["taught_at"] and why["support"] == 2
        assert why["outcomes"] == {"successes": 1, "failures": 0}

        status = await agent.call("memory_status")
        assert (status["facts_known"], status["waiting_to_be_filed"]) == (2, 2)
        assert status["last_learned"]["text"] == LESSON
        assert status["last_learned"]["at"] == why["taught_at"]

        seen["unknown"] = await agent.refused("memory_explain", fact_id=999_999)
        seen["unknown outcome"] = await agent.refused(
            "memory_outcome", fact_id=999_999, success=True
        )
        seen["empty"] = await agent.refused("memory_write", content="   ")
        seen["secret"] = await agent.refused(
            "memory_write", content="The wifi password is hunter22"
        )
        seen["verdict"] = await agent.refused(
            "memory_write", content="Deploys need approval.", verdict="contradiction"
        )
        seen["budget"] = await agent.refused("memory_context", goal="x", token_budget=10)
        # Still serving after every refusal.
        assert (await agent.call("memory_status"))["facts_known"] == 2

    logged = drive(scenario, "--user", "alice")

    assert "no fact #999999" in seen["unknown"]
    assert "no fact #999999" in seen["unknown outcome"]
    assert "A fact can't be empty" in seen["empty"]
    assert "looks like a password" in seen["secret"]
    assert "a contradiction verdict needs the id of the fact it is about" in seen["verdict"]
    assert "token_budget must be between 50 and 32,000; got 10." in seen["budget"]
    assert "SynchronousOnlyOperation" not in logged
    assert "Traceback" not in logged
    assert Fact.objects.count() == 2
    assert Fact.objects.get(text=LESSON).support == 2
    assert InboxItem.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_an_unknown_memory_stops_the_server_before_it_serves():
    params = _server("--memory", "nowhere")
    finished = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert finished.returncode != 0
    assert finished.stdout == ""
    assert "There is no memory called 'nowhere'." in finished.stderr
