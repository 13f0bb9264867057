"""Sources: where what brain knows came from. "See the run" on a fact opens one of these."""

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from knowledge import access, source_listing
from knowledge.models import Fact, Memory, Permission, Source

SOURCES_PER_PAGE = 50


@require_GET
@access.requires(Permission.READ)
def sources(request: HttpRequest, memory: Memory) -> HttpResponse:
    """Every source the person may see, filtered by channel and person, searched, a page at a
    time; the filters travel in the address, so the form and the page links keep them."""
    try:
        filters = source_listing.SourceFilters.from_query(request.GET)
        error = ""
    except source_listing.BadFilter as bad:
        filters, error = source_listing.SourceFilters(), str(bad)
    listed = source_listing.sources_for(memory, request.user, filters)
    page = Paginator(listed, SOURCES_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": filters,
        "filter_error": error,
        "channels": source_listing.CHANNELS,
        "people": source_listing.people_heard(memory, request.user),
        "first_words": source_listing.FIRST_WORDS,
    }
    return render(request, "knowledge/sources.html", context)


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
