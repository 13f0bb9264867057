"""Where it came from, and the kill switch, in a real browser."""

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory
from memory import conversations, reflection

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def home() -> Memory:
    return Memory.objects.default()


def test_where_it_came_from_opens_the_conversation_at_the_teaching_turn(signed_in_page, home):
    lines = [("Sarah", f"Turn on lamp {n}") for n in range(150)]
    lines += [("Sarah", "I like the bedroom at 19"), ("brain", "Noted.")]
    source = conversations.record_conversation(
        memory=home,
        channel="voice",
        messages=[{"speaker": speaker, "text": text} for speaker, text in lines],
    ).source
    reflection.reflect(source)
    page = signed_in_page

    page.goto("/knowledge/")
    fact = page.locator("#fact-list li.fact", has_text="Sarah likes the bedroom at 19.")
    fact.get_by_role("link", name="Where it came from").click()

    taught = page.locator("#turn-150")
    expect(taught).to_have_class("turn turn-person taught")
    expect(taught).to_contain_text("I like the bedroom at 19")
    expect(taught).to_contain_text("taught this")
    expect(taught).to_be_in_viewport()  # scrolled to, not left below 150 commands
    expect(page.locator("#reflections")).to_contain_text("Learned 1 fact from the conversation")


def test_switching_learning_off_on_the_settings_page_says_what_it_means(signed_in_page, home):
    page = signed_in_page
    page.goto("/settings/")
    switches = page.locator("#switches")

    switches.locator("input[name=learning]").uncheck()
    switches.get_by_role("button", name="Save switches").click()

    expect(page.locator("#toasts")).to_contain_text("Learning is off")
    expect(switches.locator("input[name=learning]")).not_to_be_checked()
    home.refresh_from_db()
    assert home.learning is False
