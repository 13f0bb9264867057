"""The ask bar in a real browser: ask, see the facts the answer used, press "this was wrong", and
see that fact's confidence move — without the page reloading."""

import pytest
from playwright.sync_api import expect

from knowledge.models import Fact, Memory
from memory import actions
from memory.models import InboxItem, Origin
from memory.taught import Statement

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BEDROOM = "Sarah likes the bedroom at 19 degrees"


@pytest.fixture(autouse=True)
def _no_model(settings):
    settings.ANTHROPIC_API_KEY = ""


@pytest.fixture
def bedroom(admin_user) -> Fact:
    home = Memory.objects.default()
    actions.learn(
        Statement.typed(
            memory=home, text="The garage fridge is meant to run 24/7", origin=Origin.TYPED
        )
    )
    return actions.learn(
        Statement.typed(memory=home, text=BEDROOM, origin=Origin.TYPED, by=admin_user)
    ).fact


def test_ask_see_the_facts_used_press_this_was_wrong_and_see_confidence_move(
    signed_in_page, bedroom
):
    page = signed_in_page
    page.goto("/knowledge/")
    page.evaluate("window.stayedOnThePage = true")
    bar = page.locator("#ask")

    bar.get_by_label("Ask a question, or tell brain something to remember").fill(
        "What temperature does Sarah like the bedroom?"
    )
    bar.get_by_role("button", name="Ask").click()

    used = bar.locator(f"#ask-fact-{bedroom.pk}")
    expect(bar.locator("[data-answer]")).to_have_text(BEDROOM)
    expect(used.locator("[data-confidence]")).to_have_text("probably")
    expect(used.locator("[data-confidence]")).to_have_attribute("title", "Confidence 0.60 of 1")

    used.get_by_role("button", name="This was wrong").click()

    expect(bar.locator(f"#ask-fact-{bedroom.pk} [data-confidence]")).to_have_text("not sure")
    expect(page.locator(".toast").last).to_contain_text(
        f"Noted that “{BEDROOM}” was wrong: brain is not sure of it now."
    )
    assert page.evaluate("window.stayedOnThePage === true")
    bedroom.refresh_from_db()
    assert (bedroom.failures, bedroom.confidence) == (1, 0.4)


def test_teaching_from_the_ask_bar_lands_in_waiting_to_be_filed(signed_in_page, bedroom):
    page = signed_in_page
    page.goto("/knowledge/")

    page.locator("#ask-text").fill("the garage freezer is off in winter")
    page.locator("#ask").get_by_role("button", name="Ask").click()

    expect(page.locator("#ask [data-answer]")).to_contain_text("It waits to be filed")
    expect(page.locator("#waiting")).to_contain_text("the garage freezer is off in winter")
    assert InboxItem.objects.filter(text="the garage freezer is off in winter").exists()
