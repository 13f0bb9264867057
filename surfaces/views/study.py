"""The Study button on the Knowledge tab: start a study session, and the banner that counts the
time while it runs and says what it found when it lands (the pattern of File into memory now).
Works without JavaScript: the form posts and comes back to the tab, which shows the banner.

Only this page's actions pop up on it: a session someone started elsewhere (``brain learn`` at a
terminal, the API) shows as running while it runs, but its report is not put in front of a
person who did not ask for it here; the sessions a browser started are kept in its session.

A first setup (a memory with fewer than FIRST_SETUP_UNTIL facts) greets the person with three
steps — teach a first fact, add a source, run a study session — and lists what each study
session learned as it lands (``#first-setup``, re-read when the study banner lands).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from brain import htmx
from brain.htmx import Toast
from brain.words import plural
from knowledge import access
from knowledge.compile_requests import COMPILED_KINDS
from knowledge.models import Fact, Memory, Permission, Source
from memory import counts, study
from memory.forms import TopicForm
from memory.models import StudySession

TEMPLATE = "memory/_study.html"
SHOWN_FOR = timedelta(hours=1)  # a finished session's report stays on the tab this long
CHANGED = "memoryChanged"  # what a session filed is waiting to be filed: the regions re-read
LANDED = "studyLanded"  # a session finished: the first setup's list re-reads
STARTED_HERE = "studies_started"  # the sessions this browser started (the Django session)
FIRST_SETUP_UNTIL = 20  # facts: a memory this new is still being set up
SESSIONS_LISTED = 5


def _elapsed(session: StudySession) -> str:
    minutes, seconds = divmod(int(session.elapsed_seconds), 60)
    return f"{minutes} m {seconds:02d} s" if minutes else f"{seconds} s"


def findings_in_words(session: StudySession) -> list[str]:
    """What a finished session found, in sentences without fact numbers (the report the
    terminal prints names them; a page links to what they are about instead)."""
    if session.state == StudySession.State.FAILED:
        return [f"The study of {session.topic} did not finish."]
    said = [f"Studied {session.topic}: read {plural(session.facts_read, 'fact')}."]
    if session.facts_read < study.KNOWN_AT_LEAST:
        said.append(f"Little is known about {session.topic} yet.")
    if session.stale:
        said.append(
            f"{plural(session.stale, 'fact')} not said or used for "
            f"{study.STALE_AFTER.days} days may be out of date."
        )
    if session.thin:
        said.append(
            f"{plural(session.thin, 'fact')} rest{'s' if session.thin == 1 else ''} "
            "on a single mention."
        )
    if session.contradictions:
        said.append(f"{plural(session.contradictions, 'pair')} of facts may disagree.")
    if session.facts_read and not (session.stale or session.thin or session.contradictions):
        said.append("Nothing looked out of date, thin or contradictory.")
    if session.filed:
        said.append(f"It concluded {plural(session.filed, 'new fact')}.")
    return said


def _started_here(request: HttpRequest) -> set[int]:
    return set(request.session.get(STARTED_HERE, []))


def banner_context(session: StudySession | None, request: HttpRequest | None = None) -> dict:
    """The banner: a session while it runs; once it landed, only one started on this page."""
    if session is None:
        return {"study": None}
    if not session.is_running and request is not None and session.pk not in _started_here(request):
        return {"study": None}
    return {
        "study": session,
        "study_elapsed": _elapsed(session),
        "study_words": [] if session.is_running else findings_in_words(session),
    }


def study_context(memory: Memory, reader, request: HttpRequest | None = None) -> dict:
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
    return banner_context(latest, request)


# The first setup --------------------------------------------------------------------------------


@dataclass
class Landed:
    """A study session in the first setup's list: what it found, and what it concluded."""

    session: StudySession
    words: list[str]
    concluded: list[Fact] = field(default_factory=list)


def first_setup_context(request: HttpRequest, memory: Memory, known: int | None = None) -> dict:
    """The three steps of a first setup and the study sessions' findings, for a memory with
    fewer than FIRST_SETUP_UNTIL facts the person may read; nothing otherwise. ``known``: the
    count of those facts, when the page has it already."""
    reader = request.user
    known = counts.known(memory, reader) if known is None else known
    if known >= FIRST_SETUP_UNTIL:
        return {"first_setup": None}
    sessions = list(
        StudySession.objects.readable_by(reader)
        .for_memory(memory)
        .order_by("-started_at", "-pk")[:SESSIONS_LISTED]
    )
    concluded: dict[str, list[Fact]] = {}
    references = [f"study-session-{session.pk}" for session in sessions]
    if references:
        facts = (
            counts.facts(memory, reader)
            .filter(source__reference__in=references, source__kind=Source.Kind.STUDY)
            .select_related("source")
            .without_vectors()
            .order_by("created_at", "pk")
        )
        for fact in facts:
            concluded.setdefault(fact.source.reference, []).append(fact)
    landed = [
        Landed(
            session,
            [] if session.is_running else findings_in_words(session),
            concluded.get(f"study-session-{session.pk}", []),
        )
        for session in sessions
    ]
    sources = Source.objects.filter(memory=memory).readable_by(reader)
    return {
        "first_setup": {
            "taught": known > 0 or counts.waiting_to_be_filed(memory, reader) > 0,
            "source_added": sources.filter(kind__in=COMPILED_KINDS).exists(),
            "studied": any(not item.session.is_running for item in landed),
            "sessions": landed,
            "running": any(item.session.is_running for item in landed),
        }
    }


@require_GET
@access.requires(Permission.READ)
def first_setup(request: HttpRequest, memory: Memory) -> HttpResponse:
    """``#first-setup`` on its own: re-read when a session lands, and while one runs."""
    context = {"memory": memory, **first_setup_context(request, memory)}
    return htmx.partial(request, "memory/_first_setup.html#first-setup", context)


# The Study button --------------------------------------------------------------------------------


@require_POST
@access.requires(Permission.TEACH)
def start_study(request: HttpRequest, memory: Memory) -> HttpResponse:
    back = reverse("memory:knowledge")
    form = TopicForm(request.POST)
    form.is_valid()  # any words: study.start says what it refuses
    try:
        started = study.start(memory=memory, topic=form.cleaned_data["topic"], by=request.user)
    except htmx.REFUSALS as refused:
        context = study_context(memory, request.user, request)
        toast = Toast(htmx.reason(refused), "error")
        return htmx.answer(request, f"{TEMPLATE}#study", context, back=back, toast=toast)
    if started.started:
        request.session[STARTED_HERE] = [*_started_here(request), started.session.pk][-20:]
    level = "info" if started.started else "warning"
    return htmx.answer(
        request,
        f"{TEMPLATE}#study",
        banner_context(started.session, request),
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
    response = htmx.partial(
        request,
        f"{TEMPLATE}#study",
        banner_context(session, request),
        event=CHANGED if landed and session.filed else None,
    )
    if landed:
        response = trigger_client_event(response, LANDED)
    return response
