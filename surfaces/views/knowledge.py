"""House → Knowledge: the brief, the measurements, the memory document, teaching and asking,
what waits to be filed, the facts, and the change log — what a household member reads and uses.
An operator's settings (the switches, the core, model calls, workers) are on the Settings page.
A memory with nothing in it yet greets the person with the three steps of a first setup.
Every action works as a plain form; with htmx it swaps only the region it changed and tells the
others through events (``memoryChanged``)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Count, Window
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from brain import htmx
from brain.htmx import Toast
from brain.words import quoted, sentence
from knowledge import access, listing, reembedding
from knowledge.models import Conflict, Fact, Memory, PageType, Permission, Subject
from knowledge.subjects import UnknownSubject
from memory import actions, brief, consolidator, measurements, revisions
from memory.forms import DocumentForm, TextForm
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.rendering import render_markdown
from memory.taught import Statement
from review import counts as review_counts
from surfaces.views import ask, curation, study, workers

PAGE = "memory/knowledge.html"
FACTS_PER_PAGE = 15  # a phone's worth; Show more brings the next
MAX_PAGE = 1_000_000  # past every fact a page is empty; the cap keeps its offset a bigint
CHANGES_SHOWN = 6  # the newest; Show older changes brings CHANGES_MORE more at a time
CHANGES_MORE = 20
CHANGES_AT_MOST = 1_000
#: The queue card lists the next items to be filed, not every one: a bulk add of thousands would
#: put each into the page (110 items took a third of the tab's first paint at 100k facts). Its
#: count is of all of them, and all are listed by the API (``/api/memory/inbox``) and
#: ``brain memory inbox``.
WAITING_SHOWN = 50
# The chips that narrow the facts: everything, each kind of page the memory has (named as its
# page types name them), and the rules a person set.
KIND_ORDER = [kind for kind, _ in Subject.Kind.choices]
KIND_PLURALS = {"house": "The house", "person": "People", "company": "Companies"}
SORTS = [
    ("newest", "Newest first"),
    ("oldest", "Oldest first"),
    ("certain", "Most certain first"),
    ("subject", "Grouped by what it is about"),
]
WORKER_GRACE_S = 120  # an unclaimed pass this old means no worker is picking it up
CHANGED = "memoryChanged"
# The passes this browser asked for (File into memory now, Teach): only their outcome pops up on
# the page; a pass asked for elsewhere (the terminal, the daily pass) shows while it runs.
PASSES_STARTED_HERE = "passes_started"


def _started_here(request: HttpRequest, run: ConsolidationRun | None) -> None:
    if run is not None:
        started = [*request.session.get(PASSES_STARTED_HERE, []), run.pk]
        request.session[PASSES_STARTED_HERE] = started[-20:]


def _partial(request: HttpRequest, name: str, context: dict, **answer) -> HttpResponse:
    return htmx.partial(request, f"{PAGE}#{name}", context, **answer)


def _answer(request: HttpRequest, name: str, context: dict, **answer) -> HttpResponse:
    """A form's answer: the region ``name`` for htmx, else back to the tab (``brain.htmx``)."""
    answer.setdefault("back", reverse("memory:knowledge"))
    return htmx.answer(request, f"{PAGE}#{name}", context, **answer)


# Contexts, one per region ---------------------------------------------------------------------


def _brief_context(memory: Memory, reader) -> dict:
    text, written_at = brief.for_today(memory, reader)
    return {"brief_text": text, "brief_when": written_at}


_HEADING = re.compile(r"^(#{1,6})\s")


def without_empty_sections(text: str) -> str:
    """The document as a person reads it: a heading with nothing under it (the template's
    House, People, Rooms… in a memory that has none of them) is not shown. The editor keeps
    every line; only what is displayed leaves them out."""
    lines = text.splitlines()
    keep = [True] * len(lines)
    headings = [
        (index, len(found.group(1)))
        for index, line in enumerate(lines)
        if (found := _HEADING.match(line))
    ]
    for position in reversed(range(len(headings))):
        index, level = headings[position]
        end = next(
            (later for later, depth in headings[position + 1 :] if depth <= level), len(lines)
        )
        if all(not keep[at] or not lines[at].strip() for at in range(index + 1, end)):
            keep[index] = False
    shown = [line for line, kept in zip(lines, keep, strict=True) if kept]
    # A removed heading leaves the blank lines around it: one is enough.
    return "\n".join(
        line
        for index, line in enumerate(shown)
        if line.strip() or index == 0 or shown[index - 1].strip()
    ).strip()


def _document_context(memory: Memory) -> dict:
    revision = DocumentRevision.objects.current(memory)
    shown = without_empty_sections(revision.text)
    return {
        "revision": revision,
        "document_html": render_markdown(shown) if shown.strip() else "",
        "memory": memory,
    }


def _waiting_context(request: HttpRequest, memory: Memory) -> dict:
    waiting = InboxItem.objects.for_memory(memory).pending().readable_by(request.user)
    # The count of all of them comes with each row (a window over the whole queue), so a long
    # queue costs no query more than a short one.
    shown = waiting.annotate(all_waiting=Window(Count("pk"))).in_filing_order()
    items = list(shown[:WAITING_SHOWN])
    count = items[0].all_waiting if items else 0  # type: ignore[attr-defined]  # annotated above
    return {"waiting": items, "waiting_count": count, "memory": memory}


def _banner_context(run: ConsolidationRun | None) -> dict:
    if run is None:
        return {"run": None}
    elapsed = int(run.elapsed_seconds)
    minutes, seconds = divmod(elapsed, 60)
    stalled = ""
    if run.is_running:
        limit = consolidator.deadline_seconds() + 60
        if not run.claimed_at and elapsed > WORKER_GRACE_S:
            stalled = f"still waiting for a worker after {minutes} min — the worker may be down"
        elif elapsed > limit:
            stalled = f"still running after {minutes} min — the worker may be down"
    return {
        "run": run,
        "worker_wait": workers.waiting_words(run) if run.is_running else "",
        "elapsed": f"{minutes} m {seconds:02d} s" if minutes else f"{seconds} s",
        "stalled": stalled,
    }


def _filters(request: HttpRequest) -> tuple[listing.FactFilters, str, int]:
    chip = request.GET.get("chip", "")
    params = {key: request.GET.get(key, "") for key in ("q", "taught_by", "sort")}
    if chip == "rules":
        params["kind"] = Fact.Kind.RULE
    elif chip:
        params["subject_kind"] = chip
    try:
        page = min(max(1, int(request.GET.get("page", "1"))), MAX_PAGE)
    except ValueError:
        page = 1
    return listing.FactFilters.from_params(params), chip, page


def chips(memory: Memory, reader) -> list[tuple[str, str]]:
    """Everything, the kinds of page this memory has that ``reader`` may read (a memory about a
    garden shed offers no Rooms or People), each named as the memory's page types name it, and
    the rules a person set."""
    subjects = Subject.objects.for_memory(memory).readable_by(reader)
    kinds = set(subjects.values_list("kind", flat=True).distinct())
    named = dict(PageType.objects.filter(memory=memory).values_list("key", "name"))
    houses = list(subjects.filter(kind=Subject.Kind.HOUSE).values_list("name", flat=True)[:2])
    found = [("", "Everything")]
    for kind in KIND_ORDER:
        if kind not in kinds:
            continue
        if kind == Subject.Kind.HOUSE and len(houses) == 1:
            label = houses[0]
        elif kind in named and kind != Subject.Kind.HOUSE:
            name = named[kind]
            label = name if name.endswith("s") else KIND_PLURALS.get(kind, f"{name}s")
        else:
            label = KIND_PLURALS.get(kind, f"{Subject.Kind(kind).label}s")
        found.append((kind, label))
    return [*found, ("rules", "Rules you set")]


def _facts_context(request: HttpRequest, memory: Memory) -> dict:
    filters, chip, page = _filters(request)
    error = ""
    try:
        facts = listing.facts_for(memory, request.user, filters)
        start = (page - 1) * FACTS_PER_PAGE
        rows = list(facts[start : start + FACTS_PER_PAGE + 1])
    except listing.BadFilter as problem:
        rows, error = [], str(problem)
    more = len(rows) > FACTS_PER_PAGE
    state = {
        "q": filters.q,
        "chip": chip,
        "taught_by": filters.taught_by,
        "sort": filters.sort or "newest",
    }
    query = urlencode({k: v for k, v in state.items() if v and not (k == "sort" and v == "newest")})
    return {
        "facts": rows[:FACTS_PER_PAGE],
        "more": more,
        "next_page": page + 1,
        "page": page,
        "filter_error": error,
        "state": state,
        "chips": chips(memory, request.user),
        "sorts": SORTS,
        "teachers": get_user_model()
        .objects.order_by("username")
        .values_list("username", flat=True),
        "query": query,
        "facts_url": reverse("memory:facts"),
    }


def _to_settle_context(request: HttpRequest, memory: Memory) -> dict:
    conflicts = Conflict.objects.for_memory(memory).readable_by(request.user).to_settle()
    return {"conflicts": list(conflicts), "memory": memory}


def _changes_shown(request: HttpRequest) -> int:
    try:
        asked = int(request.GET.get("changes", CHANGES_SHOWN))
    except ValueError:
        asked = CHANGES_SHOWN
    return min(max(asked, CHANGES_SHOWN), CHANGES_AT_MOST)


def _changes_context(memory: Memory, shown: int = CHANGES_SHOWN) -> dict:
    rows = list(Change.objects.for_memory(memory).newest_first()[: shown + 1])
    return {
        "changes": rows[:shown],
        "changes_more": len(rows) > shown,
        "changes_next": shown + CHANGES_MORE,
    }


def _measures_context(memory: Memory, reader) -> dict:
    return {"measures": measurements.measure(memory, review_counts.for_reader(memory, reader))}


def _reembedding_context(memory: Memory, *, polled: bool = False) -> dict:
    """Re-embedding progress while the worker brings vectors to a new embedder; a poll that
    finds it finished says so once and stops polling."""
    status = reembedding.status(memory)
    return {"reembedding": status, "reembedding_finished": polled and status is None}


# The page ------------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@access.requires(Permission.READ)
def knowledge(request: HttpRequest, memory: Memory) -> HttpResponse:
    context = {**_full_context(request, memory), **_document_context(memory)}
    if request.GET.get("edit"):  # ✎ Edit markdown without JavaScript
        context.update(
            editing=True,
            draft=context["revision"].text,
            base_generation=context["revision"].generation,
        )
    return render(request, PAGE, context)


@require_GET
@access.requires(Permission.READ)
def measures(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "measures", _measures_context(memory, request.user))


@require_GET
@access.requires(Permission.READ)
def reembedding_progress(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "reembedding", _reembedding_context(memory, polled=True))


# The document --------------------------------------------------------------------------------


@require_GET
@access.requires(Permission.READ)
def document(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "document", _document_context(memory))


@require_GET
@access.requires(Permission.CURATE)
def document_editor(request: HttpRequest, memory: Memory) -> HttpResponse:
    revision = DocumentRevision.objects.current(memory)
    return _partial(
        request,
        "document",
        {
            **_document_context(memory),
            "editing": True,
            "draft": revision.text,
            "base_generation": revision.generation,
        },
    )


@require_POST
@access.requires(Permission.CURATE)
def save_document(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = DocumentForm(request.POST)
    form.is_valid()  # any words; a generation not a number has moved on (-1)
    text, base = form.cleaned_data["text"], form.cleaned_data["base_generation"]
    context = {**_document_context(memory), "editing": True, "draft": text, "base_generation": base}
    try:
        changes = revisions.save_user_edit(
            memory=memory, text=text, base_generation=base, by=request.user
        )
    except ValidationError as error:
        context["edit_error"] = htmx.reason(error)
        return htmx.again(
            request, f"{PAGE}#document", context, page=lambda: _full_context(request, memory)
        )
    except revisions.DocumentChanged as changed:
        context["edit_error"] = (
            "The document changed since you opened the editor (a pass filed meanwhile). "
            "Nothing was overwritten: your text is on the left, the document as it is now on "
            "the right. Merge what you want and save again."
        )
        context["conflict"] = changed.current
        context["base_generation"] = changed.current.generation
        return htmx.again(
            request, f"{PAGE}#document", context, page=lambda: _full_context(request, memory)
        )
    saved = Toast("Saved your edit." if changes else "No changes to save.")
    return _answer(request, "document", _document_context(memory), event=CHANGED, toast=saved)


def _full_context(request: HttpRequest, memory: Memory) -> dict:
    """Every region of the page but the document (whose state the caller decides)."""
    return {
        "memory": memory,
        **_brief_context(memory, request.user),
        **_measures_context(memory, request.user),
        **_reembedding_context(memory),
        **_waiting_context(request, memory),
        **_banner_context(ConsolidationRun.objects.running().filter(memory=memory).first()),
        **study.study_context(memory, request.user, request),
        **ask.ask_context(request, memory),
        **_facts_context(request, memory),
        **_to_settle_context(request, memory),
        **_changes_context(memory, _changes_shown(request)),
        **study.first_setup_context(request, memory),
    }


# Teaching and the queue ----------------------------------------------------------------------


@require_POST
@access.requires(Permission.TEACH)
def teach(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = TextForm(request.POST)
    form.is_valid()  # any words: learn says what it refuses
    text = form.cleaned_data["text"]
    try:
        learned = actions.learn(
            Statement.typed(memory=memory, text=text, origin=Origin.TYPED, by=request.user)
        )
    except (ValidationError, UnknownSubject) as error:
        refusal = error if isinstance(error, ValidationError) else ValidationError(str(error))
        typed = {"teach_text": text, "memory": memory}
        back = reverse("memory:knowledge")
        return htmx.refused(
            request, f"{PAGE}#teach", typed, refusal, back=back, error="teach_error"
        )
    if learned.item is None:  # already known: nothing to file
        said = (
            f"brain already knew that: {quoted(learned.fact.text)} has now been said "
            f"{learned.fact.support} times."
        )
        context = {"memory": memory, "teach_said": said}
        return _answer(request, "teach", context, event=CHANGED, said=Toast(said, "info"))
    # Teach it something merges straight in: a pass of its own files the line now.
    at_once = consolidator.file_at_once(item=learned.item, by=request.user)
    said = f"{taught_words(learned)} {at_once.message}"
    filing = at_once.request.run if at_once.request is not None else None
    _started_here(request, filing)
    context = {"memory": memory, "teach_said": said, "teach_run": filing}
    # The box says what happened in place (its own confirmation, beside the button pressed);
    # without JavaScript the same words are the page's message.
    return _answer(request, "teach", context, event=CHANGED, said=Toast(said))


def taught_words(learned: actions.Learned) -> str:
    """What the Teach box says a line did, in a sentence or two, without fact numbers."""
    said = sentence(f"brain learned {quoted(learned.fact.text)}")
    if learned.superseded is not None:
        return sentence(f"{said} It replaces {quoted(learned.superseded.text)}")
    if learned.conflict is not None:
        return (
            f"{said} It may not fit with {quoted(learned.conflict.old.text)}: both are kept "
            "until you choose under To settle."
        )
    return said


@require_POST
@access.requires(Permission.CURATE)
def drop_item(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    item = get_object_or_404(InboxItem.objects.readable_by(request.user), pk=pk, memory=memory)
    dropped = actions.drop_inbox_item(item=item, by=request.user)
    toast = (
        Toast(f"Dropped “{item.text}” from the queue.")
        if dropped
        else Toast("That line was no longer waiting.", "warning")
    )
    waiting = _waiting_context(request, memory)
    return _answer(request, "waiting", waiting, event=CHANGED, toast=toast)


@require_GET
@access.requires(Permission.READ)
def waiting(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "waiting", _waiting_context(request, memory))


@require_POST
@access.requires(Permission.CURATE)
def file_now(request: HttpRequest, memory: Memory) -> HttpResponse:
    try:
        started = consolidator.request_consolidation(
            memory=memory, by=request.user, trigger=ConsolidationRun.Trigger.MANUAL
        )
    except consolidator.LearningOff as off:
        return _answer(request, "banner", {"run": None}, toast=Toast(off.message, "error"))
    _started_here(request, started.run)
    if started.started:  # the banner shows the pass running
        return _answer(
            request, "banner", _banner_context(started.run), said=Toast(started.message, "info")
        )
    return _answer(
        request, "banner", _banner_context(started.run), toast=Toast(started.message, "warning")
    )


@require_GET
@access.requires(Permission.READ)
def banner(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    run = get_object_or_404(ConsolidationRun, pk=pk, memory=memory)
    if run.is_running:
        return _partial(request, "banner", _banner_context(run))
    # The pass landed: everything it touched refreshes itself, and its outcome is said only on
    # the page that asked for it.
    asked_here = run.pk in request.session.get(PASSES_STARTED_HERE, [])
    context = _banner_context(run) if asked_here else {"run": None}
    return _partial(request, "banner", context, event=CHANGED)


# The facts -----------------------------------------------------------------------------------


@require_GET
@access.requires(Permission.READ)
def facts(request: HttpRequest, memory: Memory) -> HttpResponse:
    """The list (a filter changed) or, with ``page`` > 1, only the next rows (Show more)."""
    context = _facts_context(request, memory)
    hx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
    if not hx:
        return redirect(f"{reverse('memory:knowledge')}?{context['query']}#facts")
    response = _partial(request, "fact-rows" if context["page"] > 1 else "facts", context)
    if context["page"] == 1:  # the address bar follows the filters, so a view can be bookmarked
        query = context["query"]
        response["HX-Push-Url"] = reverse("memory:knowledge") + (f"?{query}" if query else "")
    return response


@require_POST
@access.requires(Permission.CURATE)
def forget_fact(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    fact = get_object_or_404(Fact.objects.for_memory(memory).readable_by(request.user), pk=pk)
    message = actions.forget(fact=fact, by=request.user)
    return _answer(
        request,
        "forgotten-row",
        {"fact": fact, "message": message},
        event=CHANGED,
        said=Toast(f"“{fact.text}”: {message}"),
    )


@require_POST
@access.requires(Permission.CURATE)
def restore_fact(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    fact = get_object_or_404(Fact.objects.for_memory(memory).readable_by(request.user), pk=pk)
    try:
        actions.restore(fact=fact, by=request.user)
    except actions.CannotRestore as why:
        return _answer(
            request,
            "forgotten-row",
            {"fact": fact, "message": why.message},
            toast=Toast(why.message, "error"),
        )
    fact.refresh_from_db()
    return _answer(
        request, "fact-row", {"fact": fact}, event=CHANGED, said=Toast(f"Kept “{fact.text}”.")
    )


# Conflicts to settle -------------------------------------------------------------------------


@require_GET
@access.requires(Permission.READ)
def to_settle(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "to-settle", _to_settle_context(request, memory))


@require_POST
@access.requires(Permission.CURATE)
def settle(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    conflict = get_object_or_404(
        Conflict.objects.for_memory(memory).readable_by(request.user), pk=pk
    )
    settled, toast = curation.settle_as_posted(request, conflict)
    event = CHANGED if settled is not None else None
    return _answer(
        request,
        "to-settle",
        _to_settle_context(request, memory),
        back=_knowledge_url(memory),
        event=event,
        toast=toast,
    )


def _knowledge_url(memory: Memory) -> str:
    return reverse("memory:knowledge") + "?" + urlencode({"memory": memory.slug})


# The change log ------------------------------------------------------------------------------


@require_GET
@access.requires(Permission.READ)
def changes(request: HttpRequest, memory: Memory) -> HttpResponse:
    return _partial(request, "changes", _changes_context(memory, _changes_shown(request)))


@require_POST
@access.requires(Permission.CURATE)
def undo(request: HttpRequest, number: int, memory: Memory) -> HttpResponse:
    try:
        change = revisions.undo_change(memory=memory, number=number, by=request.user)
    except htmx.REFUSALS as why:  # a ValidationError, or CannotUndo
        event, toast = None, Toast(htmx.reason(why), "error")
    else:
        event, toast = CHANGED, Toast(f"Undone: {change.summary.removeprefix('Undid ')}")
    return _answer(request, "changes", _changes_context(memory), event=event, toast=toast)
