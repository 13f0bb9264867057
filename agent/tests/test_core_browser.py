"""The core on the Settings page in a real browser: what a person types, and what an agent is
then given."""

import pytest
from playwright.sync_api import expect

from knowledge import retrieval
from knowledge.models import Memory
from knowledge.read_layer import SYSTEM

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_pins_the_core_without_a_reload_and_the_next_block_starts_with_it(
    signed_in_page,
):
    page = signed_in_page
    page.goto("/settings/")
    page.evaluate("window.stayedOnThePage = true")
    core = page.locator("#core")

    core.locator("textarea[name=text]").fill("You work for Priya.\nNever deploy on Fridays.")
    core.get_by_role("button", name="Save the core").click()

    expect(page.locator("#toasts .toast")).to_contain_text("Saved the core")
    expect(page.locator("#core textarea[name=text]")).to_have_value(
        "You work for Priya.\nNever deploy on Fridays."
    )
    assert page.evaluate("window.stayedOnThePage === true")
    block = retrieval.context(memory=Memory.objects.default(), question="deploy", reader=SYSTEM)
    assert "## Core\nYou work for Priya.\nNever deploy on Fridays." in block.text
