"""Curating in the admin with a real browser, as a person would: find a fact by a device's
nickname, change its words, see the change in the log and in the document, undo it; merge two
subjects that are one thing; confirm a guess."""

import re

import pytest
from playwright.sync_api import expect

from knowledge.models import Fact, Memory, Subject
from memory import actions, consolidator
from memory.models import Origin
from memory.taught import Statement
from review import guesses as review_guesses

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OLD = "The office lamp turns off at 23:00."
NEW = "The office lamp turns off at 23:30."


@pytest.fixture
def home() -> Memory:
    return Memory.objects.default()


@pytest.fixture
def lamp(home) -> Subject:
    return Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id="light.office_lamp",
        aliases=["the beacon"],
    )


def _file(home, *texts: str) -> None:
    for text in texts:
        actions.learn(Statement.typed(memory=home, text=text, origin=Origin.TYPED))
    consolidator.execute(
        consolidator.request_consolidation(memory=home, trigger="cli", send=False).run.pk
    )


def _run(page, action: str, *rows: str) -> None:
    """Tick the rows that say ``rows``, choose ``action`` and press Run."""
    for row in rows:
        page.locator("#result_list tbody tr", has_text=row).locator("input.action-select").check()
    page.locator("select[name=action]").first.select_option(label=action)
    page.get_by_role("button", name="Run").first.click()


def _messages(page):
    return page.locator("ul.messagelist")


def test_a_curator_finds_a_fact_by_a_nickname_edits_it_and_undoes_the_edit(
    signed_in_page, home, lamp
):
    _file(home, OLD, "The hall is cold.")
    page = signed_in_page

    page.goto("/admin/knowledge/fact/")
    page.get_by_role("textbox", name="Search").fill("the beacon")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    page.get_by_role("link", name=OLD).click()
    page.get_by_label("Text").fill(NEW)
    page.get_by_role("button", name="Save", exact=True).click()

    expect(_messages(page)).to_contain_text(f"now reads “{NEW}”")
    expect(page.get_by_label("Text")).to_have_value(NEW)  # the fact that says it now

    page.goto("/knowledge/")
    expect(page.locator("#document")).to_contain_text(NEW)
    expect(page.locator("#document")).not_to_contain_text(OLD)
    expect(page.locator("#changes")).to_contain_text(f"now reads “{NEW}”")

    page.goto("/admin/memory/change/")
    _run(page, "Undo", "Edited fact")
    expect(_messages(page)).to_contain_text(re.compile(r"Undone: change #\d+: Edited fact #"))

    page.goto("/knowledge/")
    expect(page.locator("#document")).to_contain_text(OLD)
    expect(page.locator("#document")).not_to_contain_text(NEW)
    live = Fact.objects.for_memory(home).live().values_list("text", flat=True)
    assert sorted(live) == ["The hall is cold.", OLD]


def test_a_curator_merges_two_subjects_that_are_one_thing(signed_in_page, home, lamp):
    twin = Subject.objects.create(memory=home, kind="device", name="Desk light")
    actions.learn(Statement.typed(memory=home, text="The desk light hums.", origin=Origin.TYPED))
    page = signed_in_page

    page.goto("/admin/knowledge/subject/")
    _run(page, "Merge into one", "Office lamp", "Desk light")
    expect(page.get_by_text("Which one stays?")).to_be_visible()
    page.get_by_label("Office lamp").check()
    page.get_by_role("button", name="Merge").click()

    expect(_messages(page)).to_contain_text(
        "Merged “Desk light” into “Office lamp”: 1 fact followed; it is also called "
        "“desk light” now."
    )
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert not Subject.objects.filter(pk=twin.pk).exists()
    hums = Fact.objects.get(text="The desk light hums.")
    assert list(hums.subjects.all()) == [lamp]

    page.goto("/admin/knowledge/fact/?q=desk+light")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)


def test_a_curator_confirms_a_guess(signed_in_page, home):
    guess = review_guesses.propose_guess(
        memory=home, text="The garage fridge is meant to run all day"
    ).guess
    page = signed_in_page

    page.goto("/admin/review/guess/")
    _run(page, "Yes, that's right", "garage fridge")

    expect(_messages(page)).to_contain_text("Filed as known.")
    expect(page.locator("#result_list tbody tr", has_text="garage fridge")).to_contain_text(
        "Confirmed"
    )
    guess.refresh_from_db()
    assert guess.fact.is_live and guess.fact.text == guess.text
