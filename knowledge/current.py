"""One current memory per request: ``memory_of(request)``, used by every view (through
``access.requires``), link, form and poll; ``CurrentMemoryMiddleware`` keeps a page's explicit
choice in the session.

Where it comes from, first match wins:

1. ``?memory=<slug>`` in the address (links, bookmarks, the API).
2. The ``X-Brain-Memory`` header: every htmx request a page sends carries the memory the page
   shows (``hx-headers`` on ``<body>``), so its polls and forms act on that memory even when
   another tab has switched to a different one since.
3. A ``memory`` field in a posted form: every form on a page carries the memory in view as a
   hidden field (``memory_field`` after ``{% csrf_token %}``), so a form sent without
   JavaScript acts on it too.
4. The session: the memory last chosen on a page (the picker in the header, or an address with
   ``?memory=``), so moving between tabs stays in it. Not for the API: an API call names its
   memory or gets the default one, whoever else shares the session.
5. The default memory.

A slug that names no memory is a 404 (a session whose memory was deleted falls back quietly).
Resolving costs one query, once per request, and happens only when something asks
``memory_of``.
"""

from __future__ import annotations

import re
from typing import cast

from django.http import Http404, HttpRequest
from django.utils.functional import SimpleLazyObject
from django.utils.html import format_html

from knowledge.models import Memory

HEADER = "HTTP_X_BRAIN_MEMORY"
SESSION_KEY = "memory"
FIELD = "memory"
_SLUG = re.compile(r"[-\w]+")


def _named(request: HttpRequest) -> str:
    """The slug the request itself names (address, header or posted field), or ''."""
    slug = request.GET.get(FIELD) or request.META.get(HEADER, "")
    if (
        not slug
        and request.method == "POST"
        and request.content_type
        in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        )
    ):
        slug = request.POST.get(FIELD, "")
    return slug.strip()


def named(request: HttpRequest) -> bool:
    """Whether the request itself names its memory (address, header or posted field), rather
    than falling back to the session or the default."""
    return bool(_named(getattr(request, "_request", request)))


def _a_slug(slug: str) -> bool:
    """Whether ``slug`` could name a memory at all (letters, digits, - and _): anything else,
    a NUL say, names none and is never looked up."""
    return bool(_SLUG.fullmatch(slug))


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def resolve(request: HttpRequest) -> Memory:
    """The request's memory by the rule in the module docstring. Raises Http404."""
    slug = _named(request)
    if slug:
        memory = Memory.objects.filter(slug=slug).first() if _a_slug(slug) else None
        if memory is None:
            raise Http404("There is no memory with that slug.")
        return memory
    session = getattr(request, "session", None)
    if session is not None and not _is_api(request) and (kept := session.get(SESSION_KEY)):
        memory = Memory.objects.filter(slug=kept).first()
        if memory is not None:
            return memory
        del session[SESSION_KEY]
    return Memory.objects.default()


class _CurrentMemoryRequest(HttpRequest):
    """A request as this module leaves it, for the type checker: attributes set at run time."""

    _current_memory: Memory


def memory_of(request: HttpRequest) -> Memory:
    """``request``'s memory as a plain model instance, resolved once per request."""
    # A DRF Request wraps Django's; the memory is kept on Django's.
    underlying = cast(_CurrentMemoryRequest, getattr(request, "_request", request))
    if not hasattr(underlying, "_current_memory"):
        underlying._current_memory = resolve(underlying)
    return underlying._current_memory


class CurrentMemoryMiddleware:
    """Remembers a page's explicit choice (``?memory=`` on a page's address) in the session."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        slug = request.GET.get(FIELD, "").strip()
        if (
            _a_slug(slug)
            and request.method == "GET"
            and not _is_api(request)
            and not getattr(request, "htmx", False)
            and hasattr(request, "session")
            and request.session.get(SESSION_KEY) != slug
            and Memory.objects.filter(slug=slug).exists()
        ):
            request.session[SESSION_KEY] = slug
        return self.get_response(request)


def context(request: HttpRequest) -> dict:
    """For templates: ``current_memory`` and ``memory_field`` (the hidden input every form
    carries; polls carry the memory in the page's ``X-Brain-Memory`` header). The picker's
    list of memories comes from ``knowledge.access.context``."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    try:
        slug = memory_of(request).slug
    except Http404:
        return {}
    return {
        "current_memory": SimpleLazyObject(lambda: memory_of(request)),
        "memory_field": format_html('<input type="hidden" name="{}" value="{}">', FIELD, slug),
    }
