"""The agent's way in: one memory served as MCP tools over stdio (`brain mcp`).

Each tool is a thin call into the same actions and reads every other surface uses: ``learn``
for writes, ``retrieval`` for recall, ``record_outcome`` and ``provenance.explain``. The agent
supplies its own verdict when it has one (it is holding both statements); otherwise the offline
gate judges.

Hazards: stdout is the protocol, so nothing here prints (Django's logging goes to stderr). The
ORM is synchronous and the SDK runs tools inside an event loop, so every tool body runs through
``sync_to_async(thread_sensitive=True)``: one thread, one database connection, treated like a
request (stale connections are closed before and after). Every tool goes through
``tool_errors``: its text arguments are checked by ``brain.inputs.clean`` (a NUL or an unpaired
surrogate is refused naming the argument, or dropped from a search), and every error comes back
as a tool error whose text names the problem, never a traceback; the server keeps serving.

``memory_write`` records what the agent wrote as an episode too (the agent's log), in the same
transaction as its fact, which cites it. ``register(server, serving)`` adds this app's tools to
the server ``surfaces.mcp_server`` builds; another app's ``register`` does the same, its tools
under ``tool_errors`` and their bodies run with ``serving.call``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypedDict, cast

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import close_old_connections, transaction
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from brain import inputs
from brain.db import retry
from brain.errors import StateConflict, in_words
from knowledge import access, provenance, retrieval
from knowledge import actions as knowledge_actions
from knowledge import episodes as knowledge_episodes
from knowledge.gate import BadVerdict
from knowledge.models import Fact, Memory, Permission
from knowledge.read_layer import reader_for
from knowledge.subjects import UnknownSubject
from memory import actions, taught
from memory.models import InboxItem
from memory.taught import Statement

logger = logging.getLogger(__name__)

MAX_K = 50

INSTRUCTIONS = (
    "Long-term memory. Call memory_context (or memory_search) when you know what you are about "
    "to do; every fact carries an [id]. Teach with memory_write, reporting the outcome when you "
    "observed one (outcome=false records a failure to avoid). When acting on a fact worked or "
    "not, report it with memory_outcome: that is the only thing that moves confidence."
)


class FoundFact(TypedDict):
    id: int
    text: str
    kind: str
    valence: str  # fact | failure
    confidence: float
    support: int


class SearchResult(TypedDict):
    facts: list[FoundFact]


class ContextBlock(TypedDict):
    text: str  # empty when nothing fits, or the memory is not given to prompts
    fact_ids: list[int]
    tokens: int


class Written(TypedDict):
    verdict: str  # novel | same | refinement | contradiction | different_outcome
    fact_id: int
    queued: bool  # False: it was already known, and only its support rose
    inbox_item_id: int | None
    support: int
    superseded_fact_id: int | None
    episode_id: int  # the episode it was recorded as (the fact cites it)
    message: str


class OutcomeRecorded(TypedDict):
    fact_id: int
    previous_confidence: float
    confidence: float
    successes: int
    failures: int


class LastLearned(TypedDict):
    fact_id: int
    text: str
    at: str  # ISO 8601


class Status(TypedDict):
    memory: str
    facts_known: int
    waiting_to_be_filed: int
    last_learned: LastLearned | None


class Serving:
    """The memory (and, optionally, the person) one server speaks for. Both are read again on
    every call, so a setting changed in the web app applies to the agent's next call."""

    def __init__(self, memory: Memory, user=None):
        self.memory_id = memory.pk
        self.user_id = user.pk if user is not None else None

    def memory(self, needed: Permission = Permission.READ) -> Memory:
        """The memory, once the person may do ``needed`` in it (knowledge/access.py)."""
        memory = Memory.objects.filter(pk=self.memory_id).first()
        if memory is None:
            raise ToolError("The memory this server was started for no longer exists.")
        try:
            access.require(self.person(), memory, needed)
        except access.NotPermitted as refused:
            raise ToolError(str(refused)) from None
        return memory

    def reader(self):
        """Whose read rules apply: the person, or the read layer's SYSTEM for a server started
        with no person (the operator's, which administers every memory)."""
        return reader_for(self.person())

    def person(self):
        """The person writes are recorded under, and whose permissions apply; None: no person."""
        if self.user_id is None:
            return None
        user = get_user_model().objects.filter(pk=self.user_id).first()
        if user is None:
            raise ToolError("The user this server was started for no longer exists.")
        return user

    def facts(self):
        return Fact.objects.for_memory(self.memory()).readable_by(self.reader())

    def fact(self, fact_id: int) -> Fact:
        fact = self.facts().filter(pk=fact_id).first()
        if fact is None:
            raise ToolError(access.not_found_words("fact", fact_id))
        return fact

    async def call[T](self, work: Callable[..., T], /, *args: Any) -> T:
        """Run ``work(self, *args)`` in the ORM's thread, as a request: the body of a tool
        that an app registers beside this one's (``surfaces.mcp_server``)."""
        return await _orm(work, self, *args)


def _as_request[T](work: Callable[..., T], /, *args: Any) -> T:
    """Run one tool body as Django runs a request."""
    close_old_connections()
    try:
        return work(*args)
    finally:
        close_old_connections()


async def _orm[T](work: Callable[..., T], /, *args: Any) -> T:
    return await sync_to_async(_as_request, thread_sensitive=True)(work, *args)


# What a refusal says, by the kind of error that refused.
_REFUSALS: tuple[type[Exception], ...] = (
    ValidationError,  # bad input: every message, in order
    BadVerdict,
    UnknownSubject,
    retrieval.BadBudget,
    PermissionDenied,  # knowledge.access.NotPermitted: its message says what is needed
    StateConflict,  # already settled, learning off…: its message says why
)


def tool_errors[**P, T](tool: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """The wrapper every MCP tool goes through (put it under ``@server.tool()``).

    Text arguments are checked first (``brain.inputs.clean``, by argument name), then every
    error becomes a ``ToolError`` the agent can read: refusals keep their own message, a lost
    lock race says to send it again, and anything unexpected names the tool and the error's
    kind and is logged on one line (the traceback only at DEBUG). The SDK would otherwise answer
    a bare "Error executing tool" and log a traceback."""
    name = tool.__name__

    @functools.wraps(tool)
    async def checked(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            kwargs = {key: inputs.clean(key, value) for key, value in kwargs.items()}  # type: ignore[assignment]  # the same arguments, cleaned
            return await tool(*args, **kwargs)
        except ToolError:
            raise
        except inputs.BadInput as bad:
            raise ToolError(bad.message) from None
        except _REFUSALS as error:
            raise ToolError(in_words(error)) from None
        except Exception as error:
            if retry.is_retryable(error):
                raise ToolError(retry.BUSY_MESSAGE) from None
            logger.error("%s failed: %s: %s", name, type(error).__name__, error)
            logger.debug("%s failed", name, exc_info=True)
            raise ToolError(
                f"{name} could not finish: brain hit an unexpected error "
                f"({type(error).__name__}). The server keeps serving; its log says more."
            ) from None

    return checked


def _found(fact: Fact) -> FoundFact:
    """A fact as the tools answer it: the fields ``FoundFact`` names, read off the row."""
    return cast(FoundFact, {key: getattr(fact, key) for key in FoundFact.__annotations__})


# The tool bodies: synchronous, in the ORM's thread ---------------------------------------------


def search(serving: Serving, query: str, k: int) -> SearchResult:
    facts = retrieval.retrieve(
        memory=serving.memory(), question=query, reader=serving.reader(), k=k
    )
    return SearchResult(facts=[_found(fact) for fact in facts])


def context(serving: Serving, goal: str, token_budget: int) -> ContextBlock:
    block = retrieval.context(
        memory=serving.memory(), question=goal, reader=serving.reader(), token_budget=token_budget
    )
    return ContextBlock(text=block.text, fact_ids=block.fact_ids, tokens=block.tokens)


def write(
    serving: Serving,
    content: str,
    outcome: bool | None,
    verdict: str | None,
    target: int | None,
    confidence: str,
) -> Written:
    learned, episode = _learn_as_episode(
        serving.memory(Permission.TEACH),
        content=taught.clean_fact_text(content),
        by=serving.person(),
        outcome=outcome,
        confidence=confidence,
        verdict=verdict,
        target=target,
    )
    return Written(
        verdict=learned.verdict,
        fact_id=learned.fact.pk,
        queued=learned.item is not None,
        inbox_item_id=learned.item.pk if learned.item is not None else None,
        support=learned.fact.support,
        superseded_fact_id=learned.superseded.pk if learned.superseded is not None else None,
        episode_id=episode.pk,
        message=learned.message,
    )


@retry.retry_transaction
def _learn_as_episode(memory: Memory, *, content: str, by, outcome: bool | None, **teaching):
    """The statement recorded as an episode and taught through the gate, in one transaction:
    the fact cites the episode, which needs no sleep pass. Returns (Learned, Episode)."""
    with transaction.atomic():
        episode = knowledge_episodes.record(
            memory=memory,
            text=content,
            outcome=knowledge_episodes.outcome_word(outcome),
            by=by,
            distilled=True,
        )
        learned = actions.learn(
            Statement.distilled(
                memory=memory, text=content, by=by, outcome=outcome, evidence=[episode], **teaching
            )
        )
    return learned, episode


def outcome(serving: Serving, fact_id: int, success: bool) -> OutcomeRecorded:
    serving.memory(Permission.TEACH)
    fact = serving.fact(fact_id)
    updated = knowledge_actions.record_outcome(fact=fact, success=success)
    return OutcomeRecorded(
        fact_id=updated.pk,
        previous_confidence=fact.confidence,
        confidence=updated.confidence,
        successes=updated.successes,
        failures=updated.failures,
    )


def explain(serving: Serving, fact_id: int) -> dict[str, Any]:
    return provenance.explain(serving.fact(fact_id), reader=serving.reader())


def status(serving: Serving) -> Status:
    memory = serving.memory()
    live = serving.facts().live()
    newest = live.order_by("-created_at", "-pk").first()
    return Status(
        memory=memory.slug,
        facts_known=live.count(),
        waiting_to_be_filed=InboxItem.objects.for_memory(memory)
        .pending()
        .readable_by(serving.reader())
        .count(),
        last_learned=LastLearned(
            fact_id=newest.pk, text=newest.text, at=newest.created_at.isoformat()
        )
        if newest is not None
        else None,
    )


# The server ------------------------------------------------------------------------------------


def register(server: MCPServer, serving: Serving) -> None:
    """This app's tools on ``server``: search, context, write, outcome, explain, status."""

    @server.tool()
    @tool_errors
    async def memory_search(
        query: str, k: Annotated[int, Field(ge=1, le=MAX_K)] = 3
    ) -> SearchResult:
        """The k facts that best answer a question, best first (failures have valence
        "failure": things that went wrong before)."""
        return await _orm(search, serving, query, k)

    @server.tool()
    @tool_errors
    async def memory_context(goal: str, token_budget: int = 600) -> ContextBlock:
        """The memory block for what you are about to do: what has gone wrong before, then
        what is known, each line with its [id], within token_budget (50 to 32,000)."""
        return await _orm(context, serving, goal, token_budget)

    @server.tool()
    @tool_errors
    async def memory_write(
        content: str,
        outcome: bool | None = None,
        verdict: str | None = None,
        target: int | None = None,
        confidence: str = "medium",
    ) -> Written:
        """Teach one statement. outcome: true if doing it worked, false if it failed (stored
        as a failure to avoid), omitted if unknown. verdict (your own judgement against a fact
        you were shown): novel, same, refinement or contradiction; all but novel need target,
        the fact's id. A contradiction or refinement retires the target; "same" only raises
        its support. confidence: high, medium or low."""
        return await _orm(write, serving, content, outcome, verdict, target, confidence)

    @server.tool()
    @tool_errors
    async def memory_outcome(fact_id: int, success: bool) -> OutcomeRecorded:
        """Report whether acting on fact [fact_id] worked. Only outcomes you observed: that a
        fact was relevant is not evidence that it was true."""
        return await _orm(outcome, serving, fact_id, success)

    @server.tool()
    @tool_errors
    async def memory_explain(fact_id: int) -> dict[str, Any]:
        """Why brain believes fact [fact_id]: who taught it, when, through which channel and
        source, what it replaced or was replaced by, its outcomes, and whether it still
        holds."""
        return await _orm(explain, serving, fact_id)

    @server.tool()
    @tool_errors
    async def memory_status() -> Status:
        """How much is known: live facts, candidates waiting to be filed, the last learned."""
        return await _orm(status, serving)
