"""The pinned core on the Knowledge tab: a small form that works without JavaScript; with htmx
it swaps only ``#core`` (``memory/knowledge.html#core``) and raises a toast."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from agent import actions
from knowledge import access
from knowledge.models import Memory, Permission

PARTIAL = "memory/knowledge.html#core"


def _memory_query(request: HttpRequest) -> str:
    slug = request.GET.get("memory", "")
    return urlencode({"memory": slug}) if slug else ""


@require_POST
@access.requires(Permission.CURATE)
def save_core(request: HttpRequest, memory: Memory) -> HttpResponse:
    text = request.POST.get("text", "")
    query = _memory_query(request)
    try:
        saved = actions.set_core(memory=memory, text=text, by=request.user)
    except ValidationError as error:
        problem = " ".join(error.messages)
        if not request.htmx:
            messages.error(request, problem)
            return redirect(reverse("memory:knowledge") + (f"?{query}" if query else ""))
        context = {"memory": memory, "memory_query": query, "core_error": problem}
        return render(request, PARTIAL, {**context, "core_text": text})
    if not request.htmx:
        messages.success(request, saved.message)
        return redirect(reverse("memory:knowledge") + (f"?{query}" if query else ""))
    response = render(request, PARTIAL, {"memory": memory, "memory_query": query})
    return trigger_client_event(response, "showToast", {"text": saved.message, "level": "success"})
