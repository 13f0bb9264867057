"""The House tab (``/``): the overview of one home (``surfaces.house``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from knowledge import access
from knowledge.models import Memory, Permission
from surfaces.house import overview
from surfaces.views import study


@require_GET
@access.requires(Permission.READ)
def house(request: HttpRequest, memory: Memory) -> HttpResponse:
    """``/``: the overview of one home (``surfaces.house``); a memory being set up first shows
    the three steps of a first setup (``surfaces.views.study``)."""
    shown = overview(memory, request.user)
    context = {
        "memory": memory,
        "house": shown,
        **study.first_setup_context(request, memory, known=shown.counts.known),
    }
    return render(request, "review/house.html", context)
