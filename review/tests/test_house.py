"""The House page (``/``): the overview of one home, every number the one the page it links to
shows, in a fixed number of queries."""

from __future__ import annotations

import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from knowledge.models import Fact, Memory
from knowledge.read_layer import SYSTEM
from memory import actions
from memory.taught import Statement
from review import findings, guesses
from review.models import Finding
from surfaces.house import WEEKS, overview


def _number(page: str, name: str) -> str:
    found = re.search(rf'data-number="{name}"[^>]*>(.*?)</a>', page, flags=re.S)
    assert found, f"no {name} number on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def _teach_and_raise(home, count: int, offset: int = 0) -> None:
    for index in range(count):
        actions.learn(
            Statement.typed(
                memory=home,
                text=f"Room {index + offset} has {index + offset} chairs.",
                origin="typed",
            )
        )
    for index in range(count):
        findings.raise_finding(
            memory=home,
            check_id=f"check_{index + offset}",
            text=f"Check {index + offset} is unhappy.",
            severity="low",
        )


def test_a_new_house_says_nothing_waits_and_how_to_begin(signed_in, home):
    page = signed_in.get(reverse("home")).content.decode()

    assert "Nothing waits on you" in page
    assert "Nothing learned yet" in page
    assert _number(page, "known") == "0"
    assert _number(page, "worker").startswith("Not seen")


def test_the_house_shows_what_waits_the_brief_and_what_was_learned_with_who_taught_it(
    signed_in, home, alice
):
    actions.learn(
        Statement.said(memory=home, text="The loft is warm in summer.", origin="voice", by=alice)
    )
    findings.raise_finding(
        memory=home, check_id="leak", text="Water under the kitchen sink.", severity="high"
    )
    guesses.propose_guess(memory=home, text="The office is empty on Thursdays")

    page = signed_in.get(reverse("home")).content.decode()

    assert _number(page, "waiting-on-you") == "2 to decide"
    assert _number(page, "findings") == "1 finding"
    assert _number(page, "guesses") == "1 guess"
    assert "Water under the kitchen sink." in page
    assert "The office is empty on Thursdays — right?" in page
    assert "This morning’s brief" in page and "brain learned 1 fact" in page
    assert "The loft is warm in summer." in page and "taught by alice" in page
    assert _number(page, "known") == "1"
    assert _number(page, "waiting") == "1"


def test_the_chart_counts_facts_learned_and_findings_raised_per_week(home):
    now = timezone.now()
    actions.learn(Statement.typed(memory=home, text="The loft is warm in summer.", origin="typed"))
    old = actions.learn(
        Statement.typed(memory=home, text="The cellar is damp in winter.", origin="typed")
    ).fact
    Fact.objects.filter(pk=old.pk).update(created_at=now - timedelta(weeks=3))
    ancient = actions.learn(
        Statement.typed(memory=home, text="The shed leaks in the rain.", origin="typed")
    ).fact
    Fact.objects.filter(pk=ancient.pk).update(created_at=now - timedelta(weeks=WEEKS + 2))
    raised = findings.raise_finding(
        memory=home, check_id="battery", text="Hall battery low.", severity="low"
    ).finding
    Finding.objects.filter(pk=raised.pk).update(first_raised_at=now - timedelta(weeks=3))

    chart = overview(home, SYSTEM, now=now).chart

    assert len(chart.weeks) == WEEKS
    assert [w.learned for w in chart.weeks][-1] == 1
    assert [w.learned for w in chart.weeks][-4] == 1
    assert [w.raised for w in chart.weeks][-4] == 1
    assert (chart.learned, chart.raised) == (2, 1)
    tallest = max(chart.weeks, key=lambda w: w.learned_bar.height)
    assert tallest.learned_bar.y + tallest.learned_bar.height == chart.baseline


def test_the_chart_is_drawn_on_the_server_without_script_or_inline_style(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm in summer.", origin="typed"))

    page = signed_in.get(reverse("home")).content.decode()

    chart = page[page.index("<svg") : page.index("</svg>")]
    assert chart.count('class="bar learned"') == WEEKS
    assert "style=" not in chart and "<script" not in page.split("</head>")[1]


def test_the_house_costs_the_same_number_of_queries_for_a_few_or_many_facts(
    signed_in, home, django_assert_max_num_queries
):
    _teach_and_raise(home, 3)
    with django_assert_max_num_queries(30) as few:
        signed_in.get(reverse("home"))
    _teach_and_raise(home, 12, offset=100)

    with django_assert_max_num_queries(len(few.captured_queries)):
        signed_in.get(reverse("home"))


def test_the_house_is_about_the_memory_chosen(signed_in, home):
    other = Memory.objects.create(slug="cabin", name="The cabin")
    actions.learn(
        Statement.typed(
            memory=other, text="The cabin stove smokes in an east wind.", origin="typed"
        )
    )

    page = signed_in.get(reverse("home"), {"memory": "cabin"}).content.decode()

    assert "The cabin" in page and "stove smokes" in page
    assert _number(page, "known") == "1"
