"""Sources that say what they hold: channel, who, when, the first words and how many live facts
cite each; filtered by channel and person, searched, paged, the filters kept in every link."""

from __future__ import annotations

import re

from django.urls import reverse

from knowledge.models import Source
from memory import actions
from memory.taught import Statement
from surfaces.views.sources import SOURCES_PER_PAGE


def _rows(page: str) -> list[str]:
    return re.findall(r'<li id="source-\d+">(.*?)</li>', page, flags=re.S)


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _get(client, **params) -> str:
    response = client.get(reverse("knowledge:sources"), params)
    assert response.status_code == 200
    return response.content.decode()


def test_a_row_says_its_channel_who_when_its_first_words_and_the_live_facts_citing_it(
    signed_in, home, alice
):
    conversation = Source.objects.create(
        memory=home,
        kind=Source.Kind.CONVERSATION,
        title="Voice conversation in the kitchen",
        text="Alice said the loft is warm in summer and the cellar is damp in winter, "
        + "and then a great deal more about the garden " * 10,
    )
    actions.learn(
        Statement.said(
            memory=home,
            text="The loft is warm in summer.",
            origin="voice",
            by=alice,
            source=conversation,
        )
    )
    actions.learn(
        Statement.said(
            memory=home,
            text="The cellar is damp in winter.",
            origin="voice",
            by=alice,
            source=conversation,
        )
    )

    row = _text(_rows(_get(signed_in))[0])

    assert "Voice conversation in the kitchen" in row
    assert "conversation · alice ·" in row
    assert "Alice said the loft is warm in summer" in row and "…" in row
    assert "2 live facts cite it" in row


def test_a_fact_no_longer_believed_is_not_counted_as_citing_its_source(signed_in, home):
    first = actions.learn(
        Statement.typed(memory=home, text="The boiler is serviced in May.", origin="typed")
    )
    actions.learn(
        Statement.typed(memory=home, text="The boiler is serviced in June.", origin="correction")
    )

    rows = [_text(row) for row in _rows(_get(signed_in))]

    old = next(row for row in rows if "The boiler is serviced in May" in row)
    assert "no live fact cites it now" in old
    assert first.fact.source_id is not None


def test_sources_are_filtered_by_channel_and_person_and_searched(
    signed_in, home, alice, django_user_model
):
    bob = django_user_model.objects.create_user(username="bob")
    actions.learn(
        Statement.said(memory=home, text="The loft is warm in summer.", origin="voice", by=alice)
    )
    actions.learn(
        Statement.typed(memory=home, text="The shed door sticks.", origin="typed", by=alice)
    )
    actions.learn(
        Statement.said(memory=home, text="The pond pump hums at night.", origin="voice", by=bob)
    )
    actions.learn(
        Statement.derived(memory=home, text="The roof was checked in March.", origin="insight")
    )

    assert len(_rows(_get(signed_in))) == 4
    conversations = _rows(_get(signed_in, kind="conversation"))
    assert len(conversations) == 2 and all("conversation ·" in _text(r) for r in conversations)
    by_alice = [_text(r) for r in _rows(_get(signed_in, person="alice"))]
    assert len(by_alice) == 2 and all("· alice ·" in r for r in by_alice)
    both = _rows(_get(signed_in, kind="conversation", person="alice"))
    assert len(both) == 1 and "loft is warm" in _text(both[0])
    found = [_text(r) for r in _rows(_get(signed_in, q="pond pump"))]
    assert len(found) == 1 and "pond pump hums" in found[0]
    assert _rows(_get(signed_in, q="nothing like this")) == []


def test_the_filter_form_and_the_page_links_keep_every_filter(signed_in, home):
    for index in range(SOURCES_PER_PAGE + 5):
        actions.learn(
            Statement.typed(
                memory=home, text=f"Shelf {index} holds {index} jars of jam.", origin="typed"
            )
        )

    page = _get(signed_in, q="jars", kind="typed")

    assert 'value="jars"' in page
    assert '<option value="typed" selected>' in page
    older = re.search(r'href="([^"]+)" rel="next"', page).group(1).replace("&amp;", "&")
    assert "q=jars" in older and "kind=typed" in older and "page=2" in older
    second = signed_in.get(reverse("knowledge:sources") + older).content.decode()
    assert len(_rows(second)) == 5
    newer = re.search(r'href="([^"]+)" rel="prev"', second).group(1).replace("&amp;", "&")
    assert "q=jars" in newer and "kind=typed" in newer


def test_a_channel_that_does_not_exist_is_named_and_every_source_still_shown(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm in summer.", origin="typed"))

    page = _get(signed_in, kind="carrier-pigeon")

    assert "There is no channel called &#x27;carrier-pigeon&#x27;" in page
    assert len(_rows(page)) == 1


def test_the_sources_list_costs_the_same_number_of_queries_for_5_or_45_sources(
    signed_in, home, django_assert_max_num_queries
):
    for index in range(5):
        actions.learn(
            Statement.said(
                memory=home, text=f"Cupboard {index} holds {index} tins.", origin="voice"
            )
        )
    with django_assert_max_num_queries(20) as few:
        _get(signed_in)
    for index in range(40):
        actions.learn(
            Statement.typed(
                memory=home, text=f"Drawer {index} holds {index} spoons.", origin="typed"
            )
        )

    with django_assert_max_num_queries(len(few.captured_queries)):
        _get(signed_in)
