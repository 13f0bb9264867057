"""The kill switches on the Knowledge tab: learning and memory_injection, read by everyone who
may read the memory, changed by those who administer it (a memory's settings). Works without
JavaScript: the form posts and comes back to the tab."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from brain import htmx
from brain.htmx import Toast
from knowledge import access
from knowledge.models import Memory, Permission
from memory import switches

TEMPLATE = "memory/_switches.html"
CHANGED = "memoryChanged"  # the measures and the banner re-read


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
        back=reverse("memory:knowledge") + "#switches",
        event=CHANGED if switched.changed else None,
        toast=Toast(switched.message, "success" if switched.changed else "info"),
    )
