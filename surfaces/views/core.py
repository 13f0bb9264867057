"""The pinned core on the Settings page: a small form that works without JavaScript; with htmx
it swaps only ``#core`` (``agent/settings.html#core``) and raises a toast."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from agent import actions
from agent.forms import CoreForm
from brain import htmx
from brain.htmx import Toast
from knowledge import access
from knowledge.models import Memory, Permission

PARTIAL = "agent/settings.html#core"


def _memory_query(request: HttpRequest) -> str:
    slug = request.GET.get("memory", "")
    return urlencode({"memory": slug}) if slug else ""


@require_POST
@access.requires(Permission.CURATE)
def save_core(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = CoreForm(request.POST)
    form.is_valid()  # nothing in it can be wrong: set_core says what is
    text = form.cleaned_data["text"]
    query = _memory_query(request)
    context = {"memory": memory, "memory_query": query}
    back = reverse("settings:page") + (f"?{query}" if query else "") + "#core"
    try:
        saved = actions.set_core(memory=memory, text=text, by=request.user)
    except ValidationError as error:
        typed = {**context, "core_text": text}
        return htmx.refused(request, PARTIAL, typed, error, back=back, error="core_error")
    return htmx.answer(request, PARTIAL, context, back=back, toast=Toast(saved.message))
