"""The page view's and Review's forms that reach this app's actions: settle a conflict (keep
one, keep both, keep both with dates, or merge), merge two pages, split a page, edit a fact.

Each calls the one action every surface calls (``actions.settle_conflict``,
``curation.merge_pages``/``split_page``, ``fact_edits.edit_fact``). A conflict's forms are
answered with its ``#conflict-N`` partial (``knowledge/_conflict.html``) for htmx; the page
actions change the page itself, so they answer by going back to it (a redirect without
JavaScript, ``HX-Location`` with). A form's ``next`` says where back is: a path on this site,
else the page or Review.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from brain.errors import StateConflict
from brain.htmx import LEVELS, Toast, answer
from knowledge import access, review
from knowledge.models import Conflict, Fact, Memory, Permission, Subject
from memory import actions, curation, fact_edits
from memory.actions import Settled

CONFLICT = "knowledge/_conflict.html"


def _next(request: HttpRequest, default: str) -> str:
    back = request.POST.get("next", "")
    return back if back.startswith("/") and not back.startswith("//") else default


def settle_as_posted(request: HttpRequest, conflict: Conflict) -> tuple[Settled | None, Toast]:
    """Settle ``conflict`` as a form posted it (``keep``; ``since``, a day, for dated; ``text``
    for merged), and the toast that says how it went: every form that settles one (the page,
    Review, the Knowledge tab) reads it this way."""
    since = request.POST.get("since", "").strip()
    try:
        day = parse_date(since) if since else None
        if since and day is None:
            raise ValidationError(f"“{since}” is not a day: write it as 2026-03-01.")
        settled = actions.settle_conflict(
            conflict=conflict,
            keep=request.POST.get("keep", ""),
            text=request.POST.get("text"),
            since=day,
            by=request.user,
        )
    except ValidationError as why:
        return None, Toast(" ".join(why.messages), "error")
    except StateConflict as why:
        return None, Toast(why.message, "error")
    return settled, Toast(settled.message)


_memory_of_conflict = access.of_object(Conflict)


@require_POST
@access.requires(Permission.CURATE, of=_memory_of_conflict)
def resolve_conflict(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Settle a conflict the person may read (both sides): ``keep`` (new, old, both, dated,
    merged), with ``since`` (a day) for dated and ``text`` for merged."""
    conflict = get_object_or_404(
        Conflict.objects.for_memory(memory).readable_by(request.user), pk=pk
    )
    settled, toast = settle_as_posted(request, conflict)
    conflict = Conflict.objects.readable_by(request.user).select_related("old", "new").get(pk=pk)
    review.with_sides([conflict])
    context = {
        "conflict": conflict,
        "settled_message": settled.message if settled else "",
        "next": _next(request, reverse("knowledge:review")),
    }
    return answer(
        request,
        CONFLICT,
        context,
        back=_next(request, reverse("knowledge:review")),
        toast=toast,
        event="conflictSettled" if settled else None,
    )


_memory_of_page = access.of_object(Subject)


def _back_to(request: HttpRequest, where: str, toast: Toast) -> HttpResponse:
    """To ``where`` with ``toast`` as a message: a redirect, or ``HX-Redirect`` for htmx."""
    messages.add_message(request, LEVELS[toast.level], toast.text)
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(where)
    return redirect(where)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_page)
def merge_pages(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Merge the page ``merged`` (an id) into this one."""
    keep = get_object_or_404(Subject.objects.readable_by(request.user), pk=pk, memory=memory)
    here = reverse("knowledge:page", args=[keep.pk])
    merged = request.POST.get("merged", "")
    other = (
        Subject.objects.readable_by(request.user).for_memory(memory).filter(pk=int(merged)).first()
        if merged.isdigit()
        else None
    )
    if other is None:
        return _back_to(request, here, Toast("Choose the page to merge into this one.", "error"))
    try:
        done = curation.merge_pages(keep=keep, merged=other, by=request.user)
    except StateConflict as why:
        return _back_to(request, here, Toast(why.message, "error"))
    return _back_to(request, here, Toast(done.message))


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_page)
def split_page(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Move the chosen ``facts`` off this page onto a new page (``name``, ``kind``)."""
    page = get_object_or_404(Subject.objects.readable_by(request.user), pk=pk, memory=memory)
    here = reverse("knowledge:page", args=[page.pk])
    chosen = [int(f) for f in request.POST.getlist("facts") if f.isdigit()]
    try:
        done = curation.split_page(
            page=page,
            facts=chosen,
            name=request.POST.get("name", ""),
            kind=request.POST.get("kind", ""),
            by=request.user,
        )
    except ValidationError as why:
        return _back_to(request, here, Toast(" ".join(why.messages), "error"))
    return _back_to(request, reverse("knowledge:page", args=[done.page.pk]), Toast(done.message))


_memory_of_fact = access.of_object(Fact)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_fact)
def edit_fact(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Change a fact's words (``text``): it keeps its citations, and the change log undoes it."""
    fact = get_object_or_404(
        Fact.objects.for_memory(memory).readable_by(request.user).without_vectors(), pk=pk
    )
    back = _next(request, reverse("knowledge:pages"))
    try:
        edited = fact_edits.edit_fact(fact=fact, text=request.POST.get("text", ""), by=request.user)
    except ValidationError as why:
        return _back_to(request, back, Toast(" ".join(why.messages), "error"))
    except StateConflict as why:
        return _back_to(request, back, Toast(why.message, "error"))
    return _back_to(request, back, Toast(edited.message))
