"""Which provider serves a memory's model calls for a task (``brain.models.ModelRoute``).

The task's own route wins, then the memory's default route (task ``"*"``), then brain's
default: Anthropic, which is configured only when ``ANTHROPIC_API_KEY`` is set (offline
otherwise — what brain did before routes existed). A call made for no memory takes brain's
default.

``TASKS`` names every task the project calls a model for, as the settings page lists them
(an ``llm.Task`` is declared under one of these names or not at all); a route may name another
(a task added later) and is used all the same.

"embed" (the memory's own vectors, ``knowledge.embedding.embedder_for``) takes only a route of
its own, never the memory's default: a worker serving "*" runs a chat model, and a memory's
vectors need a model giving 384 numbers; without its own route they are computed here, where
nothing leaves the server.

``cached_route``: the route as this process read it at most ``CACHE_S`` ago, for the lookups
made on every recall (whose vectors a memory's facts and questions take). A route saved or
deleted in this process is seen at once (a signal clears the cache); one changed in another
process at most ``CACHE_S`` later.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db.models.signals import post_delete, post_save

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
    (
        "embed",
        "turn facts and questions into vectors (a model giving 384 numbers, e.g. all-minilm)",
    ),
)

#: Tasks that follow only their own route, never the memory's default "*" (see above).
OWN_ROUTE_ONLY = frozenset({"embed"})

#: Seconds a process trusts a route it read (``cached_route``): a route changed in another
#: process is taken up this much later at most. Vectors written meanwhile under the old
#: embedder's name are stale under the new one, and re-embedded in the background.
CACHE_S = 5.0


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
    if task in OWN_ROUTE_ONLY:
        names = [task]
    else:
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


_cached: dict[tuple[int, str | None], tuple[float, Route]] = {}


def cached_route(memory: Any, task: str | None) -> Route:
    """``route_for``, as this process read it at most ``CACHE_S`` ago (no query then)."""
    if memory is None:
        return DEFAULT
    key = (getattr(memory, "pk", memory), task)
    now = time.monotonic()
    kept = _cached.get(key)
    if kept is not None and kept[0] > now:
        return kept[1]
    route = route_for(memory, task)
    _cached[key] = (now + CACHE_S, route)
    return route


def forget_cached(**_signal: Any) -> None:
    """Read every route afresh next time (a route was saved or deleted in this process)."""
    _cached.clear()


post_save.connect(forget_cached, sender=ModelRoute, dispatch_uid="routing-forget-saved")
post_delete.connect(forget_cached, sender=ModelRoute, dispatch_uid="routing-forget-deleted")
