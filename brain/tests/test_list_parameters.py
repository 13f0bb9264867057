"""A list endpoint's paging parameters are input like any other: a page or a page size that is
not a number is a 400 naming it, never a 404 (as ``GET /api/passages/?q=%2500&page=abc`` once
answered), and a NUL in the search words is dropped before the search runs.

The sweep walks every API list the resolver knows (brain/tests/endpoints.py), so a list added
later is held to the same rule without anyone listing it here."""

from __future__ import annotations

import pytest

from brain.tests.endpoints import api_routes, routes
from knowledge import sources

pytestmark = pytest.mark.django_db

NOTE = "The ivy by the gate hides the code box.\n\nThe loft ladder sticks in winter."


@pytest.fixture
def note(home, admin_user):
    return sources.add_source(
        memory=home, by=admin_user, upload=sources.Upload("gate.txt", NOTE.encode())
    ).source


def _detail(response) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return response.json()["detail"]


def test_a_page_that_is_not_a_number_is_a_400_naming_the_page(signed_in, note):
    response = signed_in.get("/api/passages/?q=%2500&page=abc")

    assert response.status_code == 400
    assert "page" in _detail(response)


@pytest.mark.parametrize("page", ["abc", "0", "-1", "1.5", "١"])
def test_a_page_that_is_not_a_whole_number_from_one_is_a_400(signed_in, note, page):
    response = signed_in.get("/api/passages/", {"q": "ivy", "page": page})

    assert response.status_code == 400
    assert _detail(response).startswith("page ")


@pytest.mark.parametrize("size", ["abc", "0", "101"])
def test_a_page_size_outside_its_limits_is_a_400_naming_the_limit(signed_in, note, size):
    response = signed_in.get("/api/passages/", {"q": "ivy", "page_size": size})

    assert response.status_code == 400
    assert "page_size" in _detail(response) and "100" in _detail(response)


def test_a_page_past_the_last_is_a_404_saying_how_many_there_are(signed_in, note):
    response = signed_in.get("/api/passages/", {"q": "ivy", "page": "7"})

    assert response.status_code == 404
    assert _detail(response) == "There is no page 7: the 1 passage found fits on 1 page."


def test_the_first_and_the_last_page_still_answer(signed_in, note):
    first = signed_in.get("/api/passages/", {"q": "ivy", "page": "1", "page_size": "1"})
    last = signed_in.get("/api/passages/", {"q": "ivy", "page": "last"})

    assert first.status_code == 200 and first.json()["count"] == 1
    assert last.status_code == 200 and last.json()["results"][0]["ordinal"] == 0


def test_a_nul_in_the_search_words_is_dropped_and_the_search_answers(signed_in, note):
    response = signed_in.get("/api/passages/?q=i%00vy")

    assert response.status_code == 200
    assert [hit["ordinal"] for hit in response.json()["results"]] == [0]


LISTS = [route for route in api_routes() if "get" in route.methods and not route.params]
PAGES = [route for route in routes() if not route.api and not route.params]


@pytest.mark.parametrize("route", LISTS, ids=lambda route: route.name)
@pytest.mark.parametrize("query", ["page=abc", "page_size=abc", "page=0", "limit=abc"])
def test_no_list_answers_a_paging_parameter_that_is_not_a_number_with_a_404_or_a_5xx(
    signed_in, note, route, query
):
    """Each list either ignores a parameter it does not take (200) or refuses it in a 400 that
    names it; "not found" is for a row that does not exist, not for a word where a number
    belongs."""
    response = signed_in.get(f"{route.url()}?q=ivy&question=ivy&{query}")

    assert response.status_code in (200, 400), (route.path, response.content[:300])
    if response.status_code == 400:
        field = query.partition("=")[0]
        assert field in _detail(response), (route.path, _detail(response))


@pytest.mark.parametrize("route", PAGES, ids=lambda route: route.name)
def test_no_page_answers_a_page_number_that_is_not_a_number_with_a_404_or_a_5xx(
    signed_in, note, route
):
    """The pages' lists (Django's paginator) show their first page for a page that is not a
    number, and their last for one past it."""
    for page in ("abc", "0", "-1", str(10**30)):
        response = signed_in.get(f"{route.url()}?q=ivy&page={page}")

        answered = response.status_code
        assert answered in (200, 302, 400, 405), (route.path, page, answered)
