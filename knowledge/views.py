"""Sources: where what brain knows came from. "See the run" on a fact opens one of these."""

from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET

from knowledge import access, source_listing
from knowledge.models import Fact, Memory, Observation, Permission, Source

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


TURNS_SHOWN = 200  # of a long conversation, the turns around the one asked for


@require_GET
@access.requires(Permission.READ, of=_memory_of_source)
def source(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """A source is shown to a reader only through the facts they may read from it: those it
    taught and those it said again. A conversation is shown turn by turn, the turn that taught
    the fact named by ``?fact=`` highlighted ("See the run"), with its reflections."""
    item = get_object_or_404(Source, pk=pk, memory=memory)
    facts = (
        Fact.objects.filter(Q(source=item) | Q(observations__source=item))
        .readable_by(request.user)
        .distinct()
        .prefetch_related("subjects")
        .order_by("created_at", "pk")
    )
    if not facts.exists():
        return render(request, "knowledge/source.html", {"source": None}, status=404)
    context = {"source": item, "facts": facts}
    if item.turns:
        context |= _conversation(request, item, facts)
    return render(request, "knowledge/source.html", context)


def _conversation(request: HttpRequest, item: Source, facts) -> dict:
    """The turns to show (all, or TURNS_SHOWN around the highlighted one), which facts each
    taught, and the highlighted turn."""
    taught: dict[int, list[Fact]] = {}
    readable = {fact.pk: fact for fact in facts}
    said = Observation.objects.filter(source=item, fact__in=list(readable), turn__isnull=False)
    for fact_id, turn in said.order_by("created_at", "pk").values_list("fact_id", "turn"):
        if turn is not None and readable[fact_id] not in taught.setdefault(turn, []):
            taught[turn].append(readable[fact_id])
    highlighted = None
    asked = request.GET.get("fact", "")
    if asked.isdigit():
        highlighted = next(
            (turn for turn, found in sorted(taught.items()) if int(asked) in {f.pk for f in found}),
            None,
        )
    count = len(item.turns)
    centre = highlighted if highlighted is not None else count - 1
    start = max(0, min(centre - TURNS_SHOWN // 2, count - TURNS_SHOWN))
    shown = [
        {
            "position": position,
            "speaker": turn.get("speaker", ""),
            "role": turn.get("role", ""),
            "text": turn.get("text", ""),
            "at": parse_datetime(turn.get("at") or "") if turn.get("at") else None,
            "taught": taught.get(position, []),
        }
        for position, turn in enumerate(item.turns[start : start + TURNS_SHOWN], start=start)
    ]
    return {
        "turns": shown,
        "turn_count": count,
        "turns_hidden": count - len(shown),
        "shown_from": start + 1,
        "shown_to": start + len(shown),
        "highlighted": highlighted,
    }
