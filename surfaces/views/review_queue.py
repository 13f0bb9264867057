"""The Review page: one queue for labelling doubts, conflicts and unplaced passages
(knowledge/review_items.py), each item with its actions inline.

Settling a conflict is memory's action (``memory.actions.settle_conflict``): its forms post to
``memory:resolve-conflict``, which answers with the same ``#conflict-N`` partial. Labelling an
item's passages and leaving an item as it is are this app's.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from brain.htmx import Toast, answer
from knowledge import access, labeller, labelling, review_items
from knowledge.forms import PassageLabelsForm
from knowledge.models import Label, Memory, Permission, ReviewItem

ITEMS_PER_PAGE = 25
PAGE = "knowledge/review.html"


def review_context(request: HttpRequest, memory: Memory, item: ReviewItem) -> dict:
    """What one item's partial (``#review-item``) needs."""
    may_label = access.may(request.user, memory, Permission.ADMINISTER)
    labels = list(Label.objects.filter(memory=memory).order_by("name")) if may_label else []
    return {"item": item, "labels": labels, "next": reverse("knowledge:review")}


@require_GET
@access.requires(Permission.READ)
def review_queue(request: access.PermittedRequest, memory: Memory) -> HttpResponse:
    """Everything waiting on a person that they may read, newest first, a page at a time."""
    page = Paginator(review_items.waiting(memory, request.user), ITEMS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    may_label = request.permission >= Permission.ADMINISTER  # set by access.requires
    context = {
        "page": page,
        "items": review_items.shown(page.object_list),
        "labels": list(Label.objects.filter(memory=memory).order_by("name")) if may_label else [],
        "next": reverse("knowledge:review"),
    }
    return render(request, PAGE, context)


_memory_of_item = access.of_object(ReviewItem)


def _open_item(request: HttpRequest, memory: Memory, pk: int) -> ReviewItem:
    item = review_items.item_for(memory, request.user, pk)
    if item is None:  # not theirs to read: as if it did not exist
        raise Http404("No such item in Review.")
    return item


def _answer_item(
    request: HttpRequest, memory: Memory, item: ReviewItem, toast: Toast
) -> HttpResponse:
    """The item's partial as it stands now (as it was, once it is no longer its reader's),
    with ``toast``; without htmx, back to the Review page."""
    item = review_items.item_for(memory, request.user, item.pk) or item
    return answer(
        request,
        f"{PAGE}#review-item",
        review_context(request, memory, item),
        back=reverse("knowledge:review"),
        toast=toast,
    )


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_item)
def label_item(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Choose the labels of each passage the item names (``labels-<passage id>``), which
    settles it: every fact citing them follows at once."""
    item = _open_item(request, memory, pk)
    if item.state != ReviewItem.State.OPEN:
        toast = Toast("Someone settled this already.", "error")
    else:
        labels = {label.name: label for label in Label.objects.filter(memory=memory)}
        passages = list(item.passages.as_system("the passages of an item its reader reads"))
        form = PassageLabelsForm(request.POST, passages)
        form.is_valid()  # names of no label choose nothing
        for passage in passages:
            chosen = [labels[n] for n in form.chosen(passage) if n in labels]
            labelling.label_passages([passage], chosen)
        labeller.settle(item, by=request.user)
        toast = Toast("Labelled; the facts citing those passages follow their labels now.")
    return _answer_item(request, memory, item, toast)


@require_POST
@access.requires(Permission.ADMINISTER, of=_memory_of_item)
def leave_item(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Leave a labelling doubt or an unplaced passage as it is: the item is settled."""
    item = _open_item(request, memory, pk)
    if item.kind == ReviewItem.Kind.CONFLICT:
        toast = Toast("A conflict is settled by choosing what holds.", "error")
    else:
        labeller.settle(item, by=request.user)
        toast = Toast("Left as it is.")
    return _answer_item(request, memory, item, toast)
