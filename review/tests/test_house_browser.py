"""The House page in a real browser, on the demo household: every number on it is the number the
page it links to shows, and the page is what a person first sees after signing in."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory
from review import demo_household

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo() -> Memory:
    home = Memory.objects.default()
    demo_household.load(home)
    return home


def _number(page, name: str) -> str:
    return " ".join(page.locator(f'[data-number="{name}"]').inner_text().split())


def _follow(page, name: str) -> None:
    page.locator(f'[data-number="{name}"]').click()
    page.wait_for_load_state()


def test_every_number_on_the_house_page_is_the_one_the_page_it_links_to_shows(demo, signed_in_page):
    """One load of the demo household (the slow part) for every check of the page."""
    page = signed_in_page
    page.goto("/")
    expect(page.get_by_role("heading", name="Waiting on you")).to_be_visible()
    _shows_the_brief_what_was_learned_and_the_weeks_chart(page)
    numbers = {
        name: _number(page, name)
        for name in ("waiting-on-you", "findings", "guesses", "known", "week", "waiting")
    }
    assert int(numbers["known"].replace(",", "")) > 150
    assert numbers["waiting"] != "0" and numbers["guesses"] != "0 guesses"

    _follow(page, "known")
    assert page.url.endswith("/knowledge/#facts-card")
    expect(page.locator("[data-measure=known] .value")).to_have_text(numbers["known"])

    page.goto("/")
    _follow(page, "week")
    expect(page.locator("[data-measure=week] .value")).to_have_text(numbers["week"])

    page.goto("/")
    _follow(page, "waiting")
    expect(page.locator("[data-measure=waiting] .value")).to_have_text(numbers["waiting"])
    expect(page.locator("#waiting li[id^=item-]")).to_have_count(int(numbers["waiting"]))

    page.goto("/")
    _follow(page, "waiting-on-you")
    waiting_on_you = int(numbers["waiting-on-you"].split()[0])
    expect(page.locator("[data-waiting-count]").first).to_have_text(str(waiting_on_you))
    findings = int(numbers["findings"].split()[0])
    guesses = int(numbers["guesses"].split()[0])
    expect(page.locator("li[data-kind=finding]")).to_have_count(findings)
    expect(page.locator("li[data-kind=guess]")).to_have_count(guesses)
    assert findings + guesses == waiting_on_you
    expect(page.locator("#badge-findings")).to_have_text(str(waiting_on_you))


def _shows_the_brief_what_was_learned_and_the_weeks_chart(page) -> None:
    expect(page.locator("#brief")).to_contain_text("brain learned")
    recent = page.locator("#recently-learned li")
    expect(recent).to_have_count(6)
    expect(recent.first).to_contain_text("taught by tom")
    bars = page.locator("#weeks svg rect.bar.learned")
    expect(bars).to_have_count(13)
    assert any(float(bar.get_attribute("height")) > 0 for bar in bars.all())
    learned = _number(page, "learned-weeks")
    assert re.fullmatch(r"\d+ facts learned", learned)
