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
from memory.forms import DocumentSizeForm, SwitchesForm

TEMPLATE = "memory/_switches.html"
SETTINGS = "settings:page"
CHANGED = "memoryChanged"  # the measures and the banner re-read


def _back(anchor: str) -> str:
    return reverse(SETTINGS) + anchor


@require_POST
@access.requires(Permission.ADMINISTER)
def set_switches(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = SwitchesForm(request.POST)
    form.is_valid()  # a box not ticked is off
    switched = switches.set_switches(
        memory=memory,
        learning=form.cleaned_data["learning"],
        memory_injection=form.cleaned_data["memory_injection"],
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
    form = DocumentSizeForm(request.POST)
    context = {"memory": memory, "size_range": MEMORY_MAX_KB_RANGE}
    if not form.is_valid():
        typed = {**context, "size_typed": form.typed()}
        back = _back("#document-size")
        return htmx.refused(
            request, f"{TEMPLATE}#document-size", typed, form, back=back, error="size_error"
        )
    size = form.cleaned_data["memory_max_kb"]
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
