"""Which provider serves a memory's model calls for a task (``brain.models.ModelRoute``).

The task's own route wins, then the memory's default route (task ``"*"``), then brain's
default: Anthropic, which is configured only when ``ANTHROPIC_API_KEY`` is set (offline
otherwise — what brain did before routes existed). A call made for no memory takes brain's
default.

``TASKS`` names every task the project calls a model for, as the settings page lists them;
a route may name another (a task added later) and is used all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brain.models import ModelRoute

ANTHROPIC = ModelRoute.Provider.ANTHROPIC.value
WORKER = ModelRoute.Provider.WORKER.value
OFFLINE = ModelRoute.Provider.OFFLINE.value

# (task, what it does, in a person's words), in the order a person meets them.
TASKS: tuple[tuple[str, str], ...] = (
    ("consolidate", "file what was taught into the memory document"),
    ("reflect", "find what is worth remembering in a conversation"),
    ("ask", "answer a question from what is known"),
    ("study", "draw conclusions in a study session"),
    ("compile", "turn a source's passages into facts"),
    ("label", "label a source's passages"),
    ("write_gate", "judge a new statement against what is known"),
    ("brief", "write the morning brief"),
    ("insight", "word the daily insight's patterns"),
    ("deep_review", "suggest guesses in the weekly deep review"),
    ("distil_episodes", "distil an agent's episodes into beliefs"),
    ("distil_failures", "distil an agent's failures into lessons"),
)


@dataclass(frozen=True)
class Route:
    provider: str  # "anthropic", "worker" or "offline"
    model: str  # "" for the provider's own default
    task: str = ModelRoute.DEFAULT_TASK  # the row it came from; "" for brain's default


DEFAULT = Route(ANTHROPIC, "", "")


def route_for(memory: Any, task: str | None) -> Route:
    """The route ``memory``'s calls for ``task`` take (one query; none without a memory)."""
    if memory is None:
        return DEFAULT
    names = [ModelRoute.DEFAULT_TASK, *([task] if task else [])]
    rows = {
        row.task: row
        for row in ModelRoute.objects.filter(
            memory_id=getattr(memory, "pk", memory), task__in=names
        )
    }
    row = rows.get(task or "") or rows.get(ModelRoute.DEFAULT_TASK)
    return Route(row.provider, row.model, row.task) if row else DEFAULT


def routes_of(memory: Any) -> dict[str, Route]:
    """Every route ``memory`` has, by task ("*" for its default)."""
    return {
        row.task: Route(row.provider, row.model, row.task)
        for row in ModelRoute.objects.filter(memory_id=getattr(memory, "pk", memory))
    }
