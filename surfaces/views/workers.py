"""The Settings page's model calls (``#model-routes``) and workers (``#workers``).

``#model-routes``: who serves the memory's model calls, per task and for every task without its
own route — Anthropic, a worker, or offline (``brain.workers.set_routes``). Read by everyone
who may read the memory, changed by those who administer it (a memory's setting). Works
without JavaScript: the form posts and comes back to the page.

``#workers``: the worker programs seen for this memory (when, what they served and had refused,
their last call) and the calls waiting for one (task, age, time left). It re-reads itself
every few seconds while calls wait. Tokens are made and revoked in the admin or with
``brain worker-token``: their keys never appear on a page after they are made.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from brain import htmx, workers
from brain.htmx import Toast
from brain.llm import routing
from brain.models import ModelRoute, WaitingCall, Worker, WorkerToken
from knowledge import access
from knowledge.models import Memory, Permission
from memory.forms import RoutesForm

TEMPLATE = "memory/_workers.html"
SHOWN_AT_MOST = 20


def _routes(memory: Memory) -> list[dict]:
    stored = routing.routes_of(memory)
    known = [(ModelRoute.DEFAULT_TASK, "every task without a route of its own"), *routing.TASKS]
    named = {task for task, _ in known}
    known += [(task, "") for task in sorted(stored) if task not in named]
    return [
        {
            "task": task,
            "what": what,
            "provider": stored[task].provider if task in stored else "",
            "model": stored[task].model if task in stored else "",
        }
        for task, what in known
    ]


def routes_context(memory: Memory) -> dict:
    default = "Anthropic" if settings.ANTHROPIC_API_KEY else "offline (no model)"
    return {
        "memory": memory,
        "model_routes": _routes(memory),
        "route_choices": ModelRoute.Provider.choices,
        "route_default": default,
    }


def workers_context(memory: Memory) -> dict:
    now = timezone.now()
    seen = list(
        Worker.objects.filter(token__memory=memory)
        .select_related("token")
        .order_by("-last_seen_at")[:SHOWN_AT_MOST]
    )
    waiting = list(
        WaitingCall.objects.filter(
            memory=memory,
            state__in=[WaitingCall.State.WAITING, WaitingCall.State.LEASED],
            deadline__gt=now,
        )
        .only("task", "model", "state", "worker_name", "created_at", "deadline", "attempts")
        .order_by("created_at")[:SHOWN_AT_MOST]
    )
    for call in waiting:
        call.age_s = int((now - call.created_at).total_seconds())  # type: ignore[attr-defined]  # for the template
        call.left_s = int((call.deadline - now).total_seconds())  # type: ignore[attr-defined]  # for the template
    return {
        "memory": memory,
        "workers_seen": seen,
        "calls_waiting": waiting,
        "worker_tokens": WorkerToken.objects.filter(memory=memory, revoked_at__isnull=True).count(),
    }


def waiting_words(run) -> str:
    """What a running pass waits for, when its model call waits for a worker: "" otherwise."""
    if run.claimed_at is None:
        return ""
    call = (
        WaitingCall.objects.filter(
            memory_id=run.memory_id,
            task="consolidate",
            state__in=[WaitingCall.State.WAITING, WaitingCall.State.LEASED],
            created_at__gte=run.claimed_at,
        )
        .only("state", "worker_name", "model")
        .first()
    )
    if call is None:
        return ""
    if call.state == WaitingCall.State.LEASED:
        return f"{call.worker_name} is answering its model call"
    model = f" with {call.model}" if call.model else ""
    return f"waiting for a worker{model} to take its model call"


@require_POST
@access.requires(Permission.ADMINISTER)
def set_routes(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = RoutesForm(request.POST, _routes(memory))
    form.is_valid()  # any words: set_routes says what it refuses
    back = reverse("settings:page") + "#model-routes"
    try:
        result = workers.set_routes(memory=memory, routes=form.wanted())
    except ValidationError as error:
        context = routes_context(memory)
        partial = f"{TEMPLATE}#model-routes"
        return htmx.refused(request, partial, context, error, back=back, error="routes_error")
    return htmx.answer(
        request,
        f"{TEMPLATE}#model-routes",
        routes_context(memory),
        back=back,
        toast=Toast(result.message, "success" if result.changed else "info"),
    )


@require_GET
@access.requires(Permission.READ)
def workers_region(request: HttpRequest, memory: Memory) -> HttpResponse:
    return htmx.partial(request, f"{TEMPLATE}#workers", workers_context(memory))
