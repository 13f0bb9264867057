"""Sources: where what brain knows came from. "See the run" on a fact opens one of these."""

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from knowledge.models import Fact, Memory, Source

SOURCES_PER_PAGE = 50


@require_GET
def sources(request: HttpRequest) -> HttpResponse:
    memory = Memory.objects.default()
    readable = Fact.objects.for_memory(memory).readable_by(request.user)
    listed = (
        Source.objects.filter(memory=memory, facts__in=readable)
        .distinct()
        .order_by("-created_at", "-pk")
    )
    page = Paginator(listed, SOURCES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "knowledge/sources.html", {"page": page})


@require_GET
def source(request: HttpRequest, pk: int) -> HttpResponse:
    """A source is shown to a reader only through the facts they may read from it."""
    item = get_object_or_404(Source, pk=pk)
    facts = (
        Fact.objects.filter(source=item)
        .readable_by(request.user)
        .prefetch_related("subjects")
        .order_by("created_at")
    )
    if not facts.exists():
        return render(request, "knowledge/source.html", {"source": None}, status=404)
    return render(request, "knowledge/source.html", {"source": item, "facts": facts})
