"""Sources: where what brain knows came from. "See the run" on a fact opens one of these."""

from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from brain import htmx
from brain.errors import StateConflict
from brain.htmx import Toast, answer, partial
from brain.inputs import allows_body
from knowledge import (
    access,
    compile_requests,
    labelling,
    passage_search,
    review_items,
    source_listing,
    visibility,
)
from knowledge import sources as adding
from knowledge.forms import LabelsForm, SourceForm
from knowledge.models import (
    Fact,
    Label,
    Memory,
    Observation,
    Passage,
    Permission,
    Source,
)

SOURCES_PER_PAGE = 50
PASSAGES_PER_PAGE = 20  # search results across passages: a snippet each


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
        "add_source": _add_source_form(memory),
        "review_waiting": review_items.count(memory, request.user),
        "found": _passages_found(request, memory, filters.q),
    }
    return render(request, "knowledge/sources.html", context)


def _passages_found(request: HttpRequest, memory: Memory, q: str) -> dict | None:
    """The passages the person may read holding the words searched for, a page at a time
    (``?ppage=``); None when nothing is searched for."""
    if not q:
        return None
    found = passage_search.matching(memory, request.user, q)
    page = Paginator(found, PASSAGES_PER_PAGE).get_page(request.GET.get("ppage"))
    return {"page": page, "hits": [passage_search.Hit(passage) for passage in page]}


_memory_of_source = access.of_object(Source)


TURNS_SHOWN = 200  # of a long conversation, the turns around the one asked for


@require_GET
@access.requires(Permission.READ, of=_memory_of_source)
def source(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """A source is shown to a reader only through the facts they may read from it: those it
    taught and those it said again. A conversation is shown turn by turn, the turn that taught
    the fact named by ``?fact=`` highlighted ("See the run"), with its reflections."""
    item = Source.objects.readable_by(request.user).filter(pk=pk, memory=memory).first()
    if item is None:  # not there, or not theirs to read: the same answer after the same work
        return render(request, "knowledge/source.html", {"source": None}, status=404)
    visibility.mask(item, request.user)  # passages they may not read are masked in its text
    facts = (
        Fact.objects.filter(Q(source=item) | Q(observations__source=item))
        .readable_by(request.user)
        .distinct()
        .prefetch_related("subjects")
        .order_by("created_at", "pk")
    )
    context = {"source": item, "facts": facts, "passages": _passages(request, item)}
    context |= _compile_context(request, item, memory)
    if item.turns:
        context |= _conversation(request, item, facts)
    return render(request, "knowledge/source.html", context)


def _conversation(request: HttpRequest, item: Source, facts) -> dict:
    """The turns to show (all, or TURNS_SHOWN around the highlighted one), which facts each
    taught, and the highlighted turn."""
    taught: dict[int, list[Fact]] = {}
    readable = {fact.pk: fact for fact in facts}
    said = Observation.objects.readable_by(request.user).filter(
        source=item, fact__in=list(readable), turn__isnull=False
    )
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


# Adding a source, and its passages' labels (knowledge/sources.py, knowledge/labelling.py) ------


def _add_source_form(memory: Memory, **typed) -> dict:
    """What the form in knowledge/_add_source.html offers: the memory's labels."""
    labels = list(Label.objects.filter(memory=memory).order_by("name"))
    defaults = [label.name for label in labels if label.default]
    return {"labels": labels, "defaults": defaults, "chosen": [], **typed}


@allows_body(adding.MAX_UPLOAD_BYTES + 1024 * 1024)
@require_POST
@access.requires(Permission.TEACH)
def add_source(request: HttpRequest, memory: Memory) -> HttpResponse:
    """The Sources tab's form: a note or a file, kept whole and cut into labelled passages."""
    form = SourceForm(request.POST, request.FILES)
    form.is_valid()  # any words: add_source says what it refuses
    chosen, file, text = (form.cleaned_data[name] for name in ("labels", "file", "text"))
    title = form.cleaned_data["title"]
    try:
        added = adding.add_source(
            memory=memory,
            by=request.user,
            text=None if file else text,
            upload=adding.Upload(file.name, file.read()) if file else None,
            title=title,
            labels=chosen,
        )
    except ValidationError as error:
        typed = {"error": htmx.reason(error), "text": text, "chosen": chosen, "title": title}
        context = {"add_source": _add_source_form(memory, **typed)}
        return render(request, "knowledge/add_source.html", context)
    back = reverse("knowledge:source", args=[added.source.pk])
    return answer(request, "knowledge/add_source.html", {}, back=back, toast=Toast(added.message))


def _passages(request: HttpRequest, item: Source) -> dict:
    """A source's passages as the person may see them: those they read with their label chips,
    the others masked; administrators may set labels."""
    every = item.passages.as_system("each passage, shown or masked for the reader below")
    rows = list(every.prefetch_related("labels").order_by("ordinal"))
    readable = set(
        Passage.objects.filter(source=item).readable_by(request.user).values_list("pk", flat=True)
    )
    for passage in rows:
        passage.readable = passage.pk in readable
    may_label = access.may(request.user, item.memory, Permission.ADMINISTER)
    labels = list(Label.objects.filter(memory=item.memory).order_by("name")) if may_label else []
    return {
        "rows": rows,
        "masked": len(rows) - len(readable & {p.pk for p in rows}),
        "may_label": may_label,
        "labels": labels,
    }


_memory_of_passage = access.of_object(Passage)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_passage)
def label_passage(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """An administrator sets a passage's labels (settling the labeller's doubt about it): every
    fact citing it follows at once."""
    passage = get_object_or_404(Passage.objects.readable_by(request.user), pk=pk, memory=memory)
    form = LabelsForm(request.POST)
    form.is_valid()  # names of no label choose nothing
    chosen = Label.objects.filter(memory=memory, name__in=form.cleaned_data["labels"])
    done = labelling.label_passages([passage], list(chosen))
    back = reverse("knowledge:source", args=[passage.source_id]) + f"#passage-{passage.ordinal}"
    return answer(request, "knowledge/add_source.html", {}, back=back, toast=Toast(done.message))


# Compiling a source into facts on pages (knowledge/compile_requests.py; memory/compiling.py) ---

COMPILING = "knowledge/_compiling.html#compiling"
COMPILED = "sourceCompiled"  # a compile landed: the source's facts are read again


def _compile_context(request: HttpRequest, item: Source, memory: Memory) -> dict:
    """What the source view says about compiling it: the newest run (its progress while it
    runs), that learning is off, and Compile again for those who administer the memory."""
    return {
        "compile": {
            "source": item,
            "compiles": compile_requests.compiles(item),
            "run": compile_requests.latest(item),
            "learning_off": compile_requests.learning_off(memory),
            "may": access.may(request.user, memory, Permission.ADMINISTER),
        }
    }


@require_GET
@access.requires(Permission.READ, of=_memory_of_source)
def compile_status(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """The #compiling region of the source view, polled while a compile runs."""
    item = Source.objects.readable_by(request.user).filter(pk=pk, memory=memory).first()
    if item is None:
        return HttpResponse(status=404)
    context = _compile_context(request, item, memory)
    run = context["compile"]["run"]
    landed = run is not None and not run.is_running and request.GET.get("running") == "1"
    return partial(request, COMPILING, context, event=COMPILED if landed else None)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_source)
def compile_source(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Compile again: the passages not compiled yet, and those placed on no page before."""
    item = get_object_or_404(Source.objects.readable_by(request.user), pk=pk, memory=memory)
    back = reverse("knowledge:source", args=[item.pk])
    try:
        run = compile_requests.compile_again(item, by=request.user)
    except StateConflict as refused:
        context = _compile_context(request, item, memory)
        return answer(request, COMPILING, context, back=back, toast=Toast(refused.message, "error"))
    said = Toast(f"Compiling “{item.title}” (run #{run.pk}): its progress shows on the source.")
    return answer(request, COMPILING, _compile_context(request, item, memory), back=back, said=said)
