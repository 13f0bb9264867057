"""The Study button on the Knowledge tab: start a study session, and the banner that counts the
time while it runs and says what it found when it lands (the pattern of File into memory now).
Works without JavaScript: the form posts and comes back to the tab, which shows the banner."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from brain import htmx
from brain.errors import StateConflict
from brain.htmx import Toast
from knowledge import access
from knowledge.models import Memory, Permission
from memory import study
from memory.models import StudySession

TEMPLATE = "memory/_study.html"
SHOWN_FOR = timedelta(hours=1)  # a finished session's report stays on the tab this long
CHANGED = "memoryChanged"  # what a session filed is waiting to be filed: the regions re-read


def _elapsed(session: StudySession) -> str:
    minutes, seconds = divmod(int(session.elapsed_seconds), 60)
    return f"{minutes} m {seconds:02d} s" if minutes else f"{seconds} s"


def banner_context(session: StudySession | None) -> dict:
    if session is None:
        return {"study": None}
    return {"study": session, "study_elapsed": _elapsed(session)}


def study_context(memory: Memory, reader) -> dict:
    """The session the tab shows ``reader``: the one running, else the last one if it landed
    recently — among those whose report they may read (StudySession's read rule)."""
    sessions = StudySession.objects.readable_by(reader).for_memory(memory)
    latest = sessions.order_by("-started_at", "-pk").first()
    landed_long_ago = (
        latest is not None
        and not latest.is_running
        and (latest.finished_at is None or timezone.now() - latest.finished_at > SHOWN_FOR)
    )
    if landed_long_ago:
        latest = None
    return banner_context(latest)


@require_POST
@access.requires(Permission.TEACH)
def start_study(request: HttpRequest, memory: Memory) -> HttpResponse:
    back = reverse("memory:knowledge")
    try:
        started = study.start(memory=memory, topic=request.POST.get("topic", ""), by=request.user)
    except (ValidationError, StateConflict) as refused:
        words = (
            refused.message if isinstance(refused, StateConflict) else " ".join(refused.messages)
        )
        context = study_context(memory, request.user)
        return htmx.answer(
            request, f"{TEMPLATE}#study", context, back=back, toast=Toast(words, "error")
        )
    level = "info" if started.started else "warning"
    return htmx.answer(
        request,
        f"{TEMPLATE}#study",
        banner_context(started.session),
        back=back,
        said=Toast(started.message, level) if started.started else None,
        toast=None if started.started else Toast(started.message, level),
    )


@require_GET
@access.requires(Permission.READ)
def study_status(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    session = get_object_or_404(
        StudySession.objects.readable_by(request.user), pk=pk, memory=memory
    )
    landed = not session.is_running
    return htmx.partial(
        request,
        f"{TEMPLATE}#study",
        banner_context(session),
        event=CHANGED if landed and session.filed else None,
    )
