"""The kill switches and the document's size on the Settings page (``/settings/``): learning and
memory_injection, and memory_max_kb — read by everyone who may read the memory, changed by those
who administer it (a memory's settings). Works without JavaScript: the form posts and comes back
to the page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from brain import htmx
from brain.htmx import Toast
from knowledge import access
from knowledge.models import MEMORY_MAX_KB_RANGE, Memory, Permission
from memory import switches

TEMPLATE = "memory/_switches.html"
SETTINGS = "settings:page"
CHANGED = "memoryChanged"  # the measures and the banner re-read


def _back(anchor: str) -> str:
    return reverse(SETTINGS) + anchor


@require_POST
@access.requires(Permission.ADMINISTER)
def set_switches(request: HttpRequest, memory: Memory) -> HttpResponse:
    switched = switches.set_switches(
        memory=memory,
        learning=request.POST.get("learning") == "on",
        memory_injection=request.POST.get("memory_injection") == "on",
        by=request.user,
    )
    return htmx.answer(
        request,
        f"{TEMPLATE}#switches",
        {"memory": memory},
        back=_back("#switches"),
        event=CHANGED if switched.changed else None,
        toast=Toast(switched.message, "success" if switched.changed else "info"),
    )


@require_POST
@access.requires(Permission.ADMINISTER)
def set_document_size(request: HttpRequest, memory: Memory) -> HttpResponse:
    """How much the memory document may hold (memory_max_kb), within MEMORY_MAX_KB_RANGE."""
    typed = request.POST.get("memory_max_kb", "").strip()
    low, high = MEMORY_MAX_KB_RANGE
    context = {"memory": memory, "size_range": MEMORY_MAX_KB_RANGE}
    try:
        size = int(typed)
        if not low <= size <= high:
            raise ValueError
    except ValueError:
        problem = f"The document's size is a whole number of KB from {low} to {high}."
        typed_back = {**context, "size_error": problem, "size_typed": typed}
        return htmx.answer(
            request,
            f"{TEMPLATE}#document-size",
            typed_back,
            back=_back("#document-size"),
            said=Toast(problem, "error"),
        )
    changed = size != memory.memory_max_kb
    if changed:
        memory.memory_max_kb = size
        memory.save(update_fields=["memory_max_kb"])
    said = (
        f"The document may now hold {size} KB."
        if changed
        else f"Nothing changed: the document may hold {size} KB."
    )
    return htmx.answer(
        request,
        f"{TEMPLATE}#document-size",
        context,
        back=_back("#document-size"),
        event=CHANGED if changed else None,
        toast=Toast(said, "success" if changed else "info"),
    )
