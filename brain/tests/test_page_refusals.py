"""A value no form of a page sends is refused the way bad input is everywhere (brain.inputs):
an htmx request gets a 400 that raises an error toast, a page the plain 400 page in the same
words, and nothing changes."""

from __future__ import annotations

import html
import json

from django.urls import reverse

from memory import actions
from memory.taught import Statement
from review import findings as review_findings
from review.models import Finding

NOT_SENT = "That request wasn't one this page sends."


def _finding(home) -> Finding:
    raised = review_findings.raise_finding(
        memory=home, check_id="door-open", text="The back door was open all night", severity="high"
    )
    assert raised.finding is not None, raised.message
    return raised.finding


def test_a_scope_no_finding_card_offers_is_the_plain_400_page_and_no_rule(signed_in, home):
    finding = _finding(home)

    response = signed_in.post(
        reverse("review:not-a-problem", args=[finding.pk]), {"scope": "the moon"}
    )

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert NOT_SENT in html.unescape(response.content.decode())
    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN


def test_an_outcome_that_is_neither_worked_nor_wrong_raises_an_error_toast(signed_in, home):
    fact = actions.learn(
        Statement.typed(memory=home, text="The bins go out on Tuesday night", origin="typed")
    ).fact

    response = signed_in.post(
        reverse("memory:ask-outcome", args=[fact.pk]),
        {"success": "7"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 400
    toast = json.loads(response["HX-Trigger"])["showToast"]
    assert toast == {"text": "success must be 1 (it worked) or 0 (it was wrong).", "level": "error"}
    fact.refresh_from_db()
    assert (fact.successes, fact.failures) == (0, 0)
