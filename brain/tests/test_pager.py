"""Every paged list pages the same way (``templates/_pager.html``): "Page 1 of 2", an "Older →"
link that keeps the rest of the query and leads to the rest of the list, and "← Newer" back."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import ReviewItem
from review.models import Event
from surfaces.views.findings import EVENTS_PER_PAGE
from surfaces.views.review_queue import ITEMS_PER_PAGE


def _review_items(memory, count: int) -> None:
    for n in range(count):
        ReviewItem.objects.create(memory=memory, kind="labelling", question=f"Which label {n}?")


def _events(memory, count: int) -> None:
    now = timezone.now()
    Event.objects.bulk_create(
        Event(memory=memory, kind=Event.Kind.LEARNED, text=f"Learned line {n}.",
              created_at=now - timedelta(minutes=n))
        for n in range(count)
    )  # fmt: skip


LISTS = [
    pytest.param("knowledge:review", _review_items, ITEMS_PER_PAGE, "Which label", id="review"),
    pytest.param("review:timeline", _events, EVENTS_PER_PAGE, "Learned line", id="timeline"),
]


def _link(page: str, rel: str) -> str:
    found = re.search(rf'<a class="button" href="([^"]+)" rel="{rel}">', page)
    assert found, f'no rel="{rel}" link'
    return found.group(1).replace("&amp;", "&")


@pytest.mark.parametrize(("name", "make", "per_page", "words"), LISTS)
def test_a_list_longer_than_a_page_pages_older_and_back_keeping_the_query(
    signed_in, home, name, make, per_page, words
):
    make(home, per_page + 3)
    url = reverse(name)

    first = signed_in.get(url, {"shown": "all"}).content.decode()
    older = _link(first, "next")
    second = signed_in.get(url + older).content.decode()
    newer = _link(second, "prev")

    assert "Page 1 of 2" in first and 'rel="prev"' not in first
    assert first.count(words) == per_page
    assert "shown=all" in older and "page=2" in older
    assert "Page 2 of 2" in second and 'rel="next"' not in second
    assert second.count(words) == 3
    assert "shown=all" in newer and "page=1" in newer


@pytest.mark.parametrize(("name", "make", "per_page", "words"), LISTS)
def test_a_list_that_fits_a_page_shows_no_pager(signed_in, home, name, make, per_page, words):
    make(home, per_page)

    page = signed_in.get(reverse(name)).content.decode()

    assert page.count(words) == per_page
    assert "Page 1 of" not in page and 'rel="next"' not in page
