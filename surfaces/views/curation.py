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
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from brain import htmx
from brain.forms import BackForm
from brain.htmx import LEVELS, Toast, answer
from knowledge import access, review_items
from knowledge.models import Conflict, Fact, Memory, Permission, Subject
from memory import actions, curation, fact_edits
from memory.actions import Settled
from memory.forms import EditFactForm, MergePagesForm, SettleForm, SplitPageForm

CONFLICT = "knowledge/_conflict.html"


def settle_as_posted(request: HttpRequest, conflict: Conflict) -> tuple[Settled | None, Toast]:
    """Settle ``conflict`` as a form posted it (``SettleForm``: ``keep``; ``since``, a day, for
    dated; ``text`` for merged), and the toast that says how it went: every form that settles
    one (the page, Review, the Knowledge tab) reads it this way."""
    form = SettleForm(request.POST)
    if not form.is_valid():
        return None, Toast(htmx.reason(form), "error")
    try:
        settled = actions.settle_conflict(
            conflict=conflict,
            keep=form.cleaned_data["keep"],
            text=form.cleaned_data["text"],
            since=form.cleaned_data["since"],
            by=request.user,
        )
    except htmx.REFUSALS as why:
        return None, Toast(htmx.reason(why), "error")
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
    back = BackForm(request.POST).back(reverse("knowledge:review"))
    conflict = Conflict.objects.readable_by(request.user).select_related("old", "new").get(pk=pk)
    review_items.with_sides([conflict])
    context = {
        "conflict": conflict,
        "settled_message": settled.message if settled else "",
        "next": back,
    }
    return answer(
        request,
        CONFLICT,
        context,
        back=back,
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
    form = MergePagesForm(
        request.POST, Subject.objects.readable_by(request.user).for_memory(memory)
    )
    if not form.is_valid():
        return _back_to(request, here, Toast(htmx.reason(form), "error"))
    try:
        done = curation.merge_pages(keep=keep, merged=form.cleaned_data["merged"], by=request.user)
    except htmx.REFUSALS as why:
        return _back_to(request, here, Toast(htmx.reason(why), "error"))
    return _back_to(request, here, Toast(done.message))


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_page)
def split_page(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Move the chosen ``facts`` off this page onto a new page (``name``, ``kind``)."""
    page = get_object_or_404(Subject.objects.readable_by(request.user), pk=pk, memory=memory)
    here = reverse("knowledge:page", args=[page.pk])
    form = SplitPageForm(request.POST)
    form.is_valid()  # any ids and words: split_page says what it refuses
    try:
        done = curation.split_page(page=page, **form.cleaned_data, by=request.user)
    except htmx.REFUSALS as why:
        return _back_to(request, here, Toast(htmx.reason(why), "error"))
    assert done.page is not None  # the new page the split made
    return _back_to(request, reverse("knowledge:page", args=[done.page.pk]), Toast(done.message))


_memory_of_fact = access.of_object(Fact)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_fact)
def edit_fact(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Change a fact's words (``text``): it keeps its citations, and the change log undoes it."""
    fact = get_object_or_404(
        Fact.objects.for_memory(memory).readable_by(request.user).without_vectors(), pk=pk
    )
    form = EditFactForm(request.POST)
    form.is_valid()  # any words: edit_fact says what it refuses
    back = form.back(reverse("knowledge:pages"))
    try:
        edited = fact_edits.edit_fact(fact=fact, text=form.cleaned_data["text"], by=request.user)
    except htmx.REFUSALS as why:
        return _back_to(request, back, Toast(htmx.reason(why), "error"))
    return _back_to(request, back, Toast(edited.message))
