"""The agent's own MCP tools on `brain mcp`: the backlog of episodes, distilling it itself, and
procedures. ``surfaces.mcp_server`` adds them to `brain mcp` after the memory app's; each goes
through ``tool_errors`` and runs as a request (``serving.call``), calling
the same actions as the API and the terminal. Reading the backlog needs read, the rest teach.
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from agent import actions
from knowledge.models import Permission, Procedure
from memory.mcp_server import Serving, tool_errors

MAX_PENDING = 200


class PendingEpisode(TypedDict):
    id: int
    text: str
    outcome: str  # ok | fail | unknown
    occurred_at: str  # ISO 8601


class Pending(TypedDict):
    episodes: list[PendingEpisode]
    waiting: int  # all the episodes waiting, beyond those listed too


class DistilResult(TypedDict):
    fact_ids: list[int]  # the beliefs learned or strengthened, one per proposition kept
    dropped: list[str]  # propositions that did not stand alone
    waiting: int
    message: str


class ProcedureResult(TypedDict):
    ref: str  # p<id>, as context() shows it
    id: int
    task: str
    steps: list[str]
    successes: int
    failures: int
    confidence: float
    message: str


def pending(serving: Serving, limit: int) -> Pending:
    memory = serving.memory(Permission.READ)
    waiting = actions.pending(memory=memory, limit=limit)
    count = actions.stats(memory=memory, reader=serving.reader()).pending
    return Pending(
        episodes=[
            PendingEpisode(
                id=episode.pk,
                text=episode.text,
                outcome=episode.outcome,
                occurred_at=episode.occurred_at.isoformat(),
            )
            for episode in waiting
        ],
        waiting=count,
    )


def distil(serving: Serving, episode_ids: list[int], propositions: list[str]) -> DistilResult:
    distilled = actions.distil(
        memory=serving.memory(Permission.TEACH),
        episode_ids=episode_ids,
        propositions=propositions,
        by=serving.person(),
    )
    return DistilResult(
        fact_ids=[learned.fact.pk for learned in distilled.learned],
        dropped=distilled.dropped,
        waiting=distilled.waiting,
        message=distilled.message,
    )


def procedure_result(recorded: actions.ProcedureRecorded) -> ProcedureResult:
    procedure: Procedure = recorded.procedure
    return ProcedureResult(
        ref=f"p{procedure.pk}",
        id=procedure.pk,
        task=procedure.task,
        steps=list(procedure.steps),
        successes=procedure.successes,
        failures=procedure.failures,
        confidence=procedure.confidence,
        message=recorded.message,
    )


def procedure(serving: Serving, task: str, steps: list[str], outcome: str) -> ProcedureResult:
    recorded = actions.record_procedure(
        memory=serving.memory(Permission.TEACH),
        task=task,
        steps=steps,
        outcome=outcome,
        by=serving.person(),
    )
    return procedure_result(recorded)


def register(server: MCPServer, serving: Serving) -> None:
    @server.tool()
    @tool_errors
    async def memory_pending(limit: Annotated[int, Field(ge=1, le=MAX_PENDING)] = 50) -> Pending:
        """The episodes waiting for the sleep pass, oldest first (id, text, outcome, when).
        Distil them yourself with memory_distil when you can see what they add up to."""
        return await serving.call(pending, limit)

    @server.tool()
    @tool_errors
    async def memory_distil(episode_ids: list[int], propositions: list[str]) -> DistilResult:
        """Distil waiting episodes into beliefs: each proposition is one self-contained
        sentence (no "it" or "that volume" pointing outside it), learned through the write
        gate citing all of episode_ids. Write a failure as "Avoid: X fails when Y". An empty
        list of propositions clears the episodes (nothing in them worth keeping). Ids that
        are not waiting episodes are refused, and nothing is distilled then."""
        return await serving.call(distil, episode_ids, propositions)

    @server.tool()
    @tool_errors
    async def memory_procedure(
        task: str, steps: list[str], outcome: str = "unknown"
    ) -> ProcedureResult:
        """Record a run of a sequence of actions: task (what it achieves), steps (in order)
        and outcome: ok, fail or unknown. The same task and steps again count as another
        run; procedures are ranked by how often they worked and shown in memory_context as
        [p<id>] lines."""
        return await serving.call(procedure, task, steps, outcome)
