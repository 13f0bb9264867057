"""Compiling offline keeps what a passage is about: a fact names its subject (the boiler's
pressure, not "the pressure"; the engineer's number, not "his number"), every durable sentence
is kept, and passages land on the pages they name or on the page of the source's subject —
in a household, on the house's page when nothing else is named. Placed on no page is the
exception, and the run says why."""

from __future__ import annotations

import pytest

from knowledge import compile_requests, sources
from knowledge.models import CompileRun, Fact, ReviewItem, Subject
from memory import compiling

BOILER_NOTE = (
    "The boiler is a Worcester Bosch 30i in the utility room. It was serviced in March by "
    "Dave Hughes from Hughes Heating. The pressure should sit between 1 and 1.5 bar. His "
    "number is on the fridge."
)


@pytest.fixture(autouse=True)
def offline(settings):
    settings.ANTHROPIC_API_KEY = ""


def _compiled(home, text: str, title: str = "", by=None) -> CompileRun:
    source = sources.add_source(memory=home, by=by, text=text, title=title).source
    run = compile_requests.latest(source)
    compiling.execute(run.pk)
    run.refresh_from_db()
    return run


def _facts(home) -> dict[str, Fact]:
    return {fact.text: fact for fact in Fact.objects.for_memory(home).as_system("the test")}


def test_a_note_about_the_boiler_names_the_boiler_in_every_fact_and_keeps_the_number(home):
    run = _compiled(home, BOILER_NOTE, title="Boiler")

    facts = _facts(home)
    assert "The boiler's pressure should sit between 1 and 1.5 bar." in facts
    assert "Dave Hughes's number is on the fridge." in facts
    assert "The boiler was serviced in March by Dave Hughes from Hughes Heating." in facts
    assert not any(text.startswith(("The pressure", "His ", "It ")) for text in facts)
    boiler = Subject.objects.as_system("the test").get(memory=home, name="Boiler")
    assert all(boiler in fact.subjects.all() for fact in facts.values())
    assert run.unplaced == 0


def test_a_note_with_no_title_lands_on_the_page_its_opening_names(home):
    machine = Subject.objects.create(memory=home, kind="device", name="Washing machine")

    run = _compiled(
        home,
        "The washing machine is a Bosch Serie 6. It takes 40 minutes on the quick wash. "
        "The filter should be cleaned every month.",
    )

    facts = _facts(home)
    assert "The washing machine takes 40 minutes on the quick wash." in facts
    assert "The washing machine's filter should be cleaned every month." in facts
    assert all(machine in fact.subjects.all() for fact in facts.values())
    assert run.unplaced == 0


def test_a_household_note_that_names_no_page_goes_on_the_house_page(home):
    run = _compiled(
        home, "The gutters were cleared in October.\n\nThe loft hatch sticks in winter."
    )

    house = Subject.objects.as_system("the test").get(memory=home, kind="house")
    assert all(house in fact.subjects.all() for fact in _facts(home).values())
    assert run.unplaced == 0
    assert not ReviewItem.objects.filter(kind=ReviewItem.Kind.UNPLACED).exists()


def test_a_durable_instruction_in_a_note_is_kept_and_a_one_off_to_do_is_not(home):
    _compiled(
        home,
        "Bleed the radiators every October before the heating goes on. Call the plumber "
        "tomorrow about the drip.",
        title="Heating",
    )

    facts = _facts(home)
    assert "Bleed the radiators every October before the heating goes on." in facts
    assert not any("plumber" in text for text in facts)
