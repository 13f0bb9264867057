"""Settings (``/settings/``): an operator's page for one memory, every setting in one place with a
line saying what it does.

The household's tabs (House, Knowledge, Findings, Sources, Pages) hold what a household member
uses; what an operator sets lives here: learning and memory in prompts (``#switches``), the
document's size (``#document-size``), the pinned core agents are given (``#core``), who serves
the model calls (``#model-routes``), the workers (``#workers``), whether brain is working
(``#health``), shortcuts into the admin for people, labels and roles (``#people``), and how
long things are kept (``#retention``).

Everyone who may read the memory may read this page; changing a setting needs administer (the
forms post to the views that own them: ``surfaces.views.switches``, ``surfaces.views.workers``,
``surfaces.views.core``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from agent import forgetting
from brain import health, workers
from brain.models import WorkerToken
from brain.words import counted
from knowledge import access, kinds
from knowledge import actions as knowledge_actions
from knowledge.models import (
    MEMORY_MAX_KB_RANGE,
    Label,
    LabellingRule,
    Membership,
    Memory,
    PageType,
    Permission,
    Role,
)
from review import house_events
from review import models as review_models
from surfaces.views import workers as worker_views

PAGE = "agent/settings.html"


@dataclass(frozen=True)
class Shortcut:
    """A link into the admin, for what is set there."""

    title: str
    what: str
    url: str
    count: int | None = None


@dataclass(frozen=True)
class Kept:
    """How long something is kept, in a line."""

    what: str
    how_long: str


def _days(span: timedelta) -> str:
    days = span.days
    return counted(days, "day")


def retention() -> list[Kept]:
    return [
        Kept(
            "A note about a device's health (“the hall sensor's battery is at 12%”)",
            f"expires after {_days(kinds.HEALTH_NOTE_LIFETIME)}",
        ),
        Kept(
            "Facts about something the house no longer has",
            "stop being used at once and are removed after "
            f"{_days(knowledge_actions.REMOVED_SUBJECT_GRACE)}; they come back if it does",
        ),
        Kept(
            "brain's own judgements about its calls",
            f"expire after {_days(kinds.JUDGEMENT_LIFETIME)} unless written again",
        ),
        Kept(
            "A guess nobody answers",
            f"retires itself after {_days(review_models.GUESS_LIFETIME)}",
        ),
        Kept(
            "A finding marked fixed",
            "stays quiet while it stays fixed; the note lapses after "
            f"{_days(review_models.SUPPRESSION_LAPSES_AFTER)}",
        ),
        Kept("What was done by hand in the house (house events)", _days(house_events.KEPT_FOR)),
        Kept(
            "An agent's belief said once and never used",
            f"retires after {_days(forgetting.DECAY_AFTER)} unseen; at most "
            f"{forgetting.PRUNE_KEEP} beliefs scored by outcomes are kept a class",
        ),
        Kept(
            "A model call handed to a worker",
            f"its words are blanked once answered; the call is deleted "
            f"{_days(workers.KEPT_AFTER_DEADLINE)} after its deadline",
        ),
        Kept(
            "Facts, sources, the document's versions and the change log",
            "kept for good: forgetting a fact retires it, it is never deleted",
        ),
    ]


def _in_admin(model: type[models.Model], memory: Memory, what: str, title: str) -> Shortcut:
    """A shortcut to ``model``'s admin list, filtered to ``memory`` (the admin's ``in_memory``
    filter), with how many rows the memory has there."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    count = model._default_manager.filter(memory=memory).count()
    return Shortcut(title, what, f"{url}?in_memory={memory.pk}", count)


def shortcuts(memory: Memory) -> list[Shortcut]:
    return [
        _in_admin(
            Membership,
            memory,
            "Each person's permission here: read, teach, curate or administer.",
            title="Who may do what",
        ),
        _in_admin(
            Label,
            memory,
            "What each label means; a passage's labels decide who reads it and every fact "
            "that cites it.",
            title="Labels",
        ),
        _in_admin(
            Role,
            memory,
            "The labels a person may read; the Everyone role is held by every member.",
            title="Roles",
        ),
        _in_admin(
            LabellingRule,
            memory,
            "Labels set on new sources by sender, channel, title words or page.",
            title="Labelling rules",
        ),
        _in_admin(
            PageType,
            memory,
            "The kinds of page this memory keeps, with what belongs on each.",
            title="Page types",
        ),
        Shortcut(
            "Worker tokens",
            "The keys a worker program uses; made and revoked there, shown once.",
            reverse("admin:brain_workertoken_changelist") + f"?memory__id__exact={memory.pk}",
            WorkerToken.objects.filter(memory=memory, revoked_at__isnull=True).count(),
        ),
    ]


@dataclass(frozen=True)
class Health:
    """Whether brain is able to work, in words."""

    database: bool
    broker: bool
    worker: str  # ok, stale or unknown
    worker_seen: datetime | None


def health_now() -> Health:
    worker = health.worker_status()
    seen = worker["last_seen"]
    return Health(
        database=health.check_database().ok,
        broker=health.check_broker().ok,
        worker=worker["status"],
        worker_seen=datetime.fromisoformat(seen) if seen else None,
    )


def settings_context(memory: Memory) -> dict:
    return {
        "memory": memory,
        "size_range": MEMORY_MAX_KB_RANGE,
        **worker_views.routes_context(memory),
        **worker_views.workers_context(memory),
        "shortcuts": shortcuts(memory),
        "retention": retention(),
        "health": health_now(),
        "memory_admin_url": reverse("admin:knowledge_memory_change", args=[memory.pk]),
    }


@require_GET
@access.requires(Permission.READ)
def settings_page(request: HttpRequest, memory: Memory) -> HttpResponse:
    return render(request, PAGE, settings_context(memory))
