"""Search across passages (knowledge/passage_search.py): on the Sources tab and at
GET /api/passages/?q=, a reader finds the passages they may read, each with its source and a
link to it there; a masked passage is never matched, counted or quoted."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from knowledge import passage_search, passages
from knowledge.models import Source
from knowledge.tests import examples


@pytest.fixture
def team(db):
    return examples.team()


def _api(client, reader, **params):
    client.force_login(reader)
    return client.get(reverse("knowledge-api:passages"), {"memory": "team", **params})


def test_a_reader_finds_only_passages_they_may_read(team):
    def found(reader, q):
        return [p.ordinal for p in passage_search.matching(team.memory, reader, q)]

    assert found(team.sales_reader, "Luca Bianchi") == [1]
    assert found(team.hr_reader, "Luca Bianchi") == [2]
    assert sorted(found(team.admin, "Luca Bianchi")) == [1, 2]
    assert found(team.sales_reader, "salary") == []


def test_passages_holding_every_word_come_first(team):
    found = list(passage_search.matching(team.memory, team.admin, "Luca salary"))
    assert found[0].ordinal == 2  # "Luca" and "salary"; the account only "Luca"
    assert found[0].rank > found[1].rank


def test_the_api_answers_with_snippets_sources_and_links_to_each_passage(client, team):
    answer = _api(client, team.hr_reader, q="salary")

    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == 1
    (hit,) = body["results"]
    assert hit["text"] == "Luca Bianchi moves to a salary of €45,000."
    assert "salary" in hit["snippet"] and "\x02" not in hit["snippet"]
    assert hit["labels"] == ["HR"]
    assert hit["source"] == {"id": team.source.pk, "title": "meeting-notes.pdf", "kind": "document"}
    assert hit["url"] == f"/sources/{team.source.pk}/#passage-2"
    opened = client.get(hit["url"].partition("#")[0])
    assert opened.status_code == 200 and 'id="passage-2"' in opened.content.decode()


def test_a_masked_passage_is_never_counted_matched_or_quoted_by_the_api(client, team):
    body = _api(client, team.sales_reader, q="salary").json()
    assert body == {"count": 0, "next": None, "previous": None, "results": []}
    body = _api(client, team.sales_reader, q="Luca").json()
    assert body["count"] == 1
    assert "salary" not in str(body)


def test_bad_searches_are_refused_naming_the_problem(client, team):
    assert _api(client, team.admin).status_code == 400
    too_long = _api(client, team.admin, q="x" * 201)
    assert too_long.status_code == 400
    assert too_long.json()["detail"] == "Search for at most 200 characters."
    only_stop_words = _api(client, team.admin, q="the and of").json()
    assert only_stop_words["count"] == 0


def test_the_sources_tab_lists_the_passages_a_reader_may_read_with_marked_snippets(client, team):
    client.force_login(team.hr_reader)
    page = client.get(reverse("knowledge:sources"), {"memory": "team", "q": "Luca"})

    body = page.content.decode()
    assert 'data-passages-count="1"' in body
    assert "<mark>Luca</mark> Bianchi moves to a salary" in body
    assert f'href="/sources/{team.source.pk}/#passage-2"' in body
    assert "follows the Rossi account" not in body

    client.force_login(team.sales_reader)
    body = client.get(reverse("knowledge:sources"), {"memory": "team", "q": "salary"})
    assert 'data-passages-count="0"' in body.content.decode()
    assert "45,000" not in body.content.decode()


def test_the_search_is_kept_by_the_form_and_by_every_page_of_results(client, team):
    source = Source.objects.create(
        memory=team.memory, kind=Source.Kind.NOTE, title="Deliveries", text=""
    )
    passages.add(
        source, [f"Delivery {n} to Rossi Srl leaves on day {n}." for n in range(25)], labels=[]
    )  # no label: administrators only
    passages.set_labels(list(source.passages.all()), [team.sales])
    client.force_login(team.sales_reader)

    first = client.get(reverse("knowledge:sources"), {"memory": "team", "q": "delivery"})
    body = first.content.decode()
    assert 'data-passages-count="26"' in body  # 25 notes and the order's "delivery in June"
    assert body.count('<li id="found-') == 20
    assert 'name="q" value="delivery"' in body
    more = re.search(r'href="([^"]+)" data-passages-next', body).group(1).replace("&amp;", "&")
    assert "q=delivery" in more and "ppage=2" in more
    second = client.get(reverse("knowledge:sources") + more).content.decode()
    assert second.count('<li id="found-') == 6
    assert 'name="q" value="delivery"' in second


def test_the_api_pages_through_results(client, team):
    source = Source.objects.create(memory=team.memory, kind=Source.Kind.NOTE, title="D", text="")
    passages.add(source, [f"Rossi Srl delivery number {n}." for n in range(7)], labels=[team.sales])

    first = _api(client, team.sales_reader, q="delivery", page_size=5).json()
    assert first["count"] == 8 and len(first["results"]) == 5
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 3 and "q=delivery" in first["next"]


def test_a_snippet_is_escaped_and_only_the_matched_words_are_marked(client, team):
    source = Source.objects.create(memory=team.memory, kind=Source.Kind.NOTE, title="N", text="")
    passages.add(
        source, ["Rossi & Figli wrote <script>alert(1)</script> on the invoice."], labels=[team.hr]
    )
    client.force_login(team.hr_reader)

    body = client.get(reverse("knowledge:sources"), {"memory": "team", "q": "invoice"})

    text = body.content.decode()
    assert "Rossi &amp; Figli wrote" in text and "on the <mark>invoice</mark>." in text
    assert "<script>alert" not in text


def test_a_page_of_results_takes_the_same_queries_however_many_passages_it_shows(client, team):
    source = Source.objects.create(memory=team.memory, kind=Source.Kind.NOTE, title="D", text="")
    client.force_login(team.sales_reader)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            found = _api(client, team.sales_reader, q="delivery", page_size=50).json()
        assert found["results"]
        return len(captured.captured_queries)

    passages.add(source, ["Rossi Srl delivery one."], labels=[team.sales])
    few = queries()
    passages.add(source, [f"Rossi Srl delivery {n}." for n in range(30)], labels=[team.sales])
    assert queries() == few


def test_the_terminal_searches_passages_as_the_person_it_acts_for(team):
    out = io.StringIO()
    call_command("sources", "--memory", "team", "--as", "giulia", "search", "Luca", stdout=out)
    assert out.getvalue().splitlines() == [
        "1 passage you may read hold “Luca”",
        f"#{team.source.pk} ¶2 meeting-notes.pdf: Luca Bianchi follows the Rossi account from "
        "March.",
    ]
