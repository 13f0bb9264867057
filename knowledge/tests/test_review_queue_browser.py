"""In a real browser: the administrator settles the seed's Sales and HR conflict from the Review
queue by merging the two statements, without leaving the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from brain.tests.pages import sign_in
from knowledge.models import Conflict, Fact
from knowledge.tests import examples
from knowledge.tests.test_conflicts_between_sources import (
    SALARY_HR,
    SALARY_SALES,
    sales_and_hr_disagree,
)

MERGED = "Luca Bianchi earns €45,000 a year; Sales had heard €50,000."


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_administrator_merges_a_conflict_from_the_review_queue(page, password):
    team = examples.team()
    conflict = sales_and_hr_disagree(team)
    team.admin.set_password(password)
    team.admin.save()
    sign_in(page, team.admin.username, password)

    page.goto("/sources/pages/?memory=team")
    page.locator("a[data-review-waiting]").click()
    expect(page.locator("h1")).to_have_text("Review")
    expect(page.locator("[data-review-count]")).to_have_text("1 item waiting")
    item = page.locator(f"#conflict-{conflict.pk}")
    expect(item.locator("[data-side=old]")).to_contain_text(SALARY_HR)
    expect(item.locator("[data-side=old] a.chip")).to_have_text("HR letter ¶1")
    expect(item.locator("[data-side=new] a.chip")).to_have_text("Sales call notes ¶1")
    expect(item.locator("[data-side=new]")).to_contain_text(SALARY_SALES)

    item.get_by_text("Merge them into one statement").click()
    item.get_by_label("The merged statement").fill(MERGED)
    item.get_by_role("button", name="Merge", exact=True).click()

    settled = page.locator(f"#conflict-{conflict.pk} .settled")
    expect(settled).to_contain_text(f"Merged into “{MERGED}”")
    expect(page.locator(".toast, [role=status]").first).to_be_visible()
    assert page.url.endswith("/sources/review/")  # swapped in place, no new page
    merged = Fact.objects.get(text=MERGED)
    assert Conflict.objects.get(pk=conflict.pk).merged_into == merged
    assert set(merged.passages.values_list("text", flat=True)) == {SALARY_HR, SALARY_SALES}

    page.reload()
    expect(page.locator("[data-review-count]")).to_have_text("0 items waiting")
    page.goto(f"/sources/pages/{team.luca.pk}/")
    expect(page.locator("#page-facts")).to_contain_text(MERGED)
    expect(page.locator("#page-conflicts")).to_have_count(0)
