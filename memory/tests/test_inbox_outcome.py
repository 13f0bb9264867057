"""The queue carries what a statement was taught with: its outcome and valence, shown on the
Knowledge tab, in the API and in the terminal."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from memory import actions
from memory.models import InboxItem, Origin
from memory.taught import Statement

FAILURE = "Setting the thermostat to 30 warms the nursery fast."
SUCCESS = "Closing the nursery blind at noon keeps it cool."
PLAIN = "The loft is warm."
HTMX = {"HX-Request": "true"}


@pytest.fixture
def taught(home):
    """Three statements waiting: one that went wrong, one that worked, one with no outcome."""
    return {
        text: actions.learn(
            Statement.typed(memory=home, text=text, origin=Origin.API, outcome=outcome)
        ).item
        for text, outcome in ((FAILURE, False), (SUCCESS, True), (PLAIN, None))
    }


def test_an_inbox_item_keeps_the_outcome_and_valence_it_was_taught_with(taught):
    failure, success, plain = (taught[t] for t in (FAILURE, SUCCESS, PLAIN))

    assert (failure.outcome, failure.valence) == (False, "failure")
    assert (success.outcome, success.valence) == (True, "fact")
    assert (plain.outcome, plain.valence) == (None, "fact")
    assert failure.fact.valence == "failure"


def test_add_to_inbox_takes_the_outcome_itself(home):
    item = actions.add_to_inbox(memory=home, text=FAILURE, origin=Origin.TYPED, outcome=False)

    item.refresh_from_db()
    assert (item.outcome, item.valence) == (False, "failure")


def _row(html: str, item: InboxItem) -> str:
    match = re.search(rf'<li id="item-{item.pk}">(.*?)</li>', html, re.DOTALL)
    assert match, html
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_the_waiting_list_on_the_knowledge_tab_shows_each_outcome(client, admin_user, taught):
    client.force_login(admin_user)

    partial = client.get(reverse("memory:waiting"), headers=HTMX).content.decode()
    page = client.get(reverse("memory:knowledge")).content.decode()

    for html in (partial, page):
        assert "it went wrong: filed as something to avoid" in _row(html, taught[FAILURE])
        assert "it worked" in _row(html, taught[SUCCESS])
        plain = _row(html, taught[PLAIN])
        assert "it worked" not in plain
        assert "went wrong" not in plain


def test_the_inbox_api_gives_each_items_outcome_and_valence(client, admin_user, taught):
    client.force_login(admin_user)

    items = {item["text"]: item for item in client.get("/api/memory/inbox").json()}

    assert (items[FAILURE]["outcome"], items[FAILURE]["valence"]) == (False, "failure")
    assert (items[SUCCESS]["outcome"], items[SUCCESS]["valence"]) == (True, "fact")
    assert (items[PLAIN]["outcome"], items[PLAIN]["valence"]) == (None, "fact")


def test_brain_memory_inbox_prints_each_outcome(taught, settings):
    settings.ANTHROPIC_API_KEY = ""
    out = io.StringIO()

    call_command("memory", "inbox", stdout=out, stderr=io.StringIO())

    lines = {
        text: next(line for line in out.getvalue().splitlines() if text in line)
        for text in (FAILURE, SUCCESS, PLAIN)
    }
    assert lines[FAILURE].endswith(
        f"{FAILURE}  (from the API, medium, it went wrong: filed as something to avoid)"
    )
    assert lines[SUCCESS].endswith(f"{SUCCESS}  (from the API, medium, it worked)")
    assert lines[PLAIN].endswith(f"{PLAIN}  (from the API, medium)")
