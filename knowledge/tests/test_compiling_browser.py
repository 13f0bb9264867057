"""In a real browser: a note added on the Sources tab is compiled while its source view watches,
its facts appear on their pages, and a citation marker opens the passage it came from."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connections, transaction
from playwright.sync_api import expect

from brain.tests.pages import sign_in
from knowledge import compile_requests
from knowledge.tests.examples import MEETING_NOTES
from knowledge.tests.test_compiling import make_team
from memory import compiling

GO = threading.Event()  # the worker takes the message once the test has seen it waiting


def _worker_after_commit(task: str, run_id: int) -> None:
    """What the worker does with the message, once the source is committed and the test says."""

    def run() -> None:
        try:
            GO.wait(timeout=30)
            compiling.execute(run_id)
        finally:
            connections.close_all()

    transaction.on_commit(lambda: threading.Thread(target=run).start())


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_note_added_in_the_browser_is_compiled_onto_pages_whose_citations_open_its_passage(
    page, password, monkeypatch
):
    monkeypatch.setattr(compile_requests, "send_on_commit", _worker_after_commit)
    GO.clear()
    team = make_team()
    team.admin.set_password(password)
    team.admin.save()
    sign_in(page, team.admin.username, password)

    page.goto("/sources/?memory=team")
    form = page.locator("#add-source form")
    form.locator("input[name=title]").fill("meeting-notes.pdf")
    form.locator("textarea[name=text]").fill(MEETING_NOTES)
    form.locator("input[name=labels][value=Sales]").check()
    form.locator("input[name=labels][value=HR]").check()
    form.get_by_role("button", name="Add source").click()

    expect(page.locator("h1")).to_have_text("meeting-notes.pdf")
    expect(page.locator("#compiling")).to_contain_text("Compiling: reading the passages…")
    expect(page.locator("#source-facts")).not_to_contain_text("signed the order")
    GO.set()
    expect(page.locator("#compiling")).to_contain_text(
        "Compiled 3 passages: 3 new facts.", timeout=20_000
    )
    facts = page.locator("#source-facts")  # read again when the compile landed
    expect(facts).to_contain_text("Rossi Srl signed the order for €50,000")
    expect(facts).to_contain_text("Luca Bianchi moves to a salary of €45,000.")

    facts.locator("li", has_text="signed the order").get_by_role("link", name="Rossi Srl").click()
    expect(page.locator("h1")).to_have_text("Rossi Srl")
    on_page = page.locator("#page-facts")
    expect(on_page).to_contain_text(
        "Rossi Srl signed the order for €50,000, with delivery in June."
    )
    expect(on_page).to_contain_text("Luca Bianchi follows the Rossi account from March.")
    expect(page.locator("#page-links")).to_contain_text("Luca Bianchi")

    on_page.get_by_role("link", name="meeting-notes.pdf ¶1").click()
    expect(page).to_have_url(re.compile(r"/sources/\d+/#passage-0$"))
    passage = page.locator("#passage-0")
    expect(passage).to_be_visible()
    expect(passage).to_contain_text(
        "Rossi Srl signed the order for €50,000, with delivery in June."
    )
    expect(passage.locator("span.chip", has_text="Sales")).to_be_visible()
