"""Sources: where what brain knows came from. "See the run" on a fact opens one of these."""

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from knowledge import access
from knowledge.models import Fact, Memory, Permission, Source

SOURCES_PER_PAGE = 50


@require_GET
@access.requires(Permission.READ)
def sources(request: HttpRequest, memory: Memory) -> HttpResponse:
    readable = Fact.objects.for_memory(memory).readable_by(request.user)
    listed = (
        Source.objects.filter(memory=memory, facts__in=readable)
        .distinct()
        .order_by("-created_at", "-pk")
    )
    page = Paginator(listed, SOURCES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "knowledge/sources.html", {"page": page})


def _memory_of_source(request: HttpRequest, pk: int) -> Memory:
    return get_object_or_404(Source.objects.select_related("memory"), pk=pk).memory


@require_GET
@access.requires(Permission.READ, of=_memory_of_source)
def source(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """A source is shown to a reader only through the facts they may read from it."""
    item = get_object_or_404(Source, pk=pk, memory=memory)
    facts = (
        Fact.objects.filter(source=item)
        .readable_by(request.user)
        .prefetch_related("subjects")
        .order_by("created_at")
    )
    if not facts.exists():
        return render(request, "knowledge/source.html", {"source": None}, status=404)
    return render(request, "knowledge/source.html", {"source": item, "facts": facts})
