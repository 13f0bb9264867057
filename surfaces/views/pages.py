"""Pages: a subject's facts and the links they make, as the reader sees them
(``knowledge.pages``), under /sources/pages/ and, where a person would type the tab's name,
/pages/; and reading every page as a role or a person (``knowledge.visibility``)."""

from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from brain.htmx import Toast, answer
from knowledge import access, pages, review_items, visibility
from knowledge.forms import ReadAsForm
from knowledge.models import Citation, Conflict, Fact, Memory, Passage, Permission, Role, Subject


@require_GET
@access.requires(Permission.READ)
def page_list(request: HttpRequest, memory: Memory) -> HttpResponse:
    """The pages that exist for the person: those with a fact they may read."""
    shown = pages.readable_pages(memory, request.user).annotate(facts_shown=Count("facts"))
    context = {"pages": shown, "review_waiting": review_items.count(memory, request.user)}
    if access.may(request.user, memory, Permission.ADMINISTER):
        context["roles"] = Role.objects.filter(memory=memory).order_by("name")
    return render(request, "knowledge/pages.html", context)


def _keeping_query(request: HttpRequest, url: str) -> str:
    query = request.META.get("QUERY_STRING", "")
    return f"{url}?{query}" if query else url


@require_GET
@access.requires(Permission.READ)
def pages_elsewhere(request: HttpRequest, memory: Memory) -> HttpResponse:
    """``/pages/``: the Pages tab, where a person would type it."""
    return redirect(_keeping_query(request, reverse("knowledge:pages")))


@require_GET
@access.requires(Permission.READ)
def page_elsewhere(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    return redirect(_keeping_query(request, reverse("knowledge:page", args=[pk])))


_memory_of_page = access.of_object(Subject)


@require_GET
@access.requires(Permission.READ, of=_memory_of_page)
def page(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """One page: the facts the person may read, each with the passages it cites, the links
    those facts make to other pages that exist for them, and open conflicts they may read."""
    subject = Subject.objects.readable_by(request.user).filter(pk=pk, memory=memory).first()
    shown = pages.page(subject, request.user) if subject is not None else None
    if subject is None or shown is None:
        return render(request, "knowledge/page.html", {"page": None}, status=404)
    ids = [fact.pk for fact in shown.facts]
    cited = Citation.objects.filter(fact_id__in=ids).select_related("passage__source")
    citations: dict[int, list[Passage]] = {pk: [] for pk in ids}
    for citation in cited.order_by("passage__source_id", "passage__ordinal"):
        citations[citation.fact_id].append(citation.passage)
    for fact in shown.facts:
        fact.cited = citations[fact.pk]
    conflicts = review_items.with_sides(
        list(
            Conflict.objects.for_memory(memory)
            .readable_by(request.user)
            .to_settle()
            .filter(Q(old__in=ids) | Q(new__in=ids))
        )
    )
    context = {
        "page": shown,
        "links": grouped_links(shown.links),
        "conflicts": conflicts,
        "until": pages.ended(subject, request.user),
    }
    if access.may(request.user, memory, Permission.ADMINISTER):
        others = pages.readable_pages(memory, request.user).exclude(pk=subject.pk)
        context["curate"] = {"others": others, "kinds": Subject.Kind.choices}
    return render(request, "knowledge/page.html", context)


def grouped_links(links: list[pages.Link]) -> list[tuple[Subject, list[Fact]]]:
    """One row per page linked to, with every fact that links there, in the order first met:
    a page named by two facts is listed once, not twice."""
    grouped: dict[int, tuple[Subject, list[Fact]]] = {}
    for link in links:
        page_facts = grouped.setdefault(link.page.pk, (link.page, []))[1]
        if link.fact not in page_facts:
            page_facts.append(link.fact)
    return list(grouped.values())


@require_POST
@access.requires(Permission.ADMINISTER)
def read_as(request: HttpRequest, memory: Memory) -> HttpResponse:
    """Read as a role or a person (``role``: a role's id; ``person``: a username), or stop
    (neither): every page then shows exactly what they read, under a banner saying whose view
    it is."""
    form = ReadAsForm(request.POST, Role.objects.filter(memory=memory))
    form.is_valid()  # a role not of this memory is none; no person is nobody
    role, person = form.cleaned_data["role"], form.cleaned_data["person"]
    if role is not None:
        request.session[visibility.READ_AS] = {"memory": memory.pk, "role": role.pk}
        said = f"You are reading {memory.name} as the role {role.name}."
    elif person:
        found = get_user_model().objects.filter(username=person).first()
        if found is None:
            return answer(
                request,
                "knowledge/pages.html",
                {},
                back=reverse("knowledge:pages"),
                toast=Toast(f"There is no person called “{person}”.", "error"),
            )
        request.session[visibility.READ_AS] = {"memory": memory.pk, "person": found.pk}
        said = f"You are reading {memory.name} as {found.get_username()}."
    else:
        request.session.pop(visibility.READ_AS, None)
        said = "You are reading as yourself again."
    back = form.back(reverse("knowledge:pages"))
    return answer(request, "knowledge/pages.html", {}, back=back, toast=Toast(said))
