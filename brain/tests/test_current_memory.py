"""One current memory: with two memories, every form, poll and link on a page acts on the
memory in view — from the address, the page's htmx header, a form's hidden field or the
session — and the API names its own."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from knowledge.models import Fact, Memory
from memory.models import InboxItem
from review import findings as review_findings
from review.models import Finding

LOFT = "The loft window sticks in winter."


@pytest.fixture
def office(db) -> Memory:
    return Memory.objects.create(slug="office", name="Office")


@pytest.fixture
def signed_in(client, admin_user, home, office):
    client.force_login(admin_user)
    return client


def _taught_into(text: str) -> str:
    return Fact.objects.get(text=text).memory.slug


def test_a_form_posted_after_opening_a_memory_acts_on_it(signed_in):
    signed_in.get("/knowledge/?memory=office")

    signed_in.post("/knowledge/teach", {"text": LOFT})

    assert _taught_into(LOFT) == "office"


def test_the_hidden_field_of_a_form_wins_over_the_session(signed_in):
    signed_in.get("/knowledge/?memory=office")  # another tab switched to Office since

    signed_in.post("/knowledge/teach", {"text": LOFT, "memory": "home"})

    assert _taught_into(LOFT) == "home"


def test_an_htmx_request_acts_on_the_memory_of_the_page_that_sent_it(signed_in):
    signed_in.get("/knowledge/")  # the session says Home

    signed_in.post(
        "/knowledge/teach", {"text": LOFT}, HTTP_HX_REQUEST="true", HTTP_X_BRAIN_MEMORY="office"
    )

    assert _taught_into(LOFT) == "office"


def test_every_form_on_the_page_carries_the_memory_in_view(signed_in):
    review_findings.raise_finding(
        memory=Memory.objects.get(slug="office"),
        check_id="leak",
        text="Water under the sink.",
        severity="high",
    )

    for path in ("/knowledge/?memory=office", "/findings/?memory=office"):
        html = signed_in.get(path).content.decode()
        forms = re.findall(r"<form\b.*?</form>", html, flags=re.DOTALL)
        page_forms = [f for f in forms if 'class="signout"' not in f and "memory-picker" not in f]
        assert page_forms, path
        carrying = [form for form in page_forms if 'name="memory" value="office"' in form]
        assert len(carrying) == len(page_forms), path
        assert '"X-Brain-Memory": "office"' in html


def test_the_api_names_its_own_memory_whatever_the_session_holds(signed_in):
    signed_in.get("/knowledge/?memory=office")

    assert signed_in.get("/api/memory/").json()["memory"] == "home"
    assert signed_in.get("/api/memory/?memory=office").json()["memory"] == "office"


def test_the_findings_tab_shows_and_acts_on_the_memory_in_view(signed_in, office, raised_finding):
    raised_finding.memory = office
    raised_finding.save(update_fields=["memory"])

    in_office = signed_in.get("/findings/?memory=office").content.decode()
    at_home = signed_in.get("/findings/?memory=home").content.decode()
    signed_in.get("/findings/?memory=office")
    fixed = signed_in.post(f"/findings/{raised_finding.pk}/fixed", {"how": "fixed"})

    assert raised_finding.text in in_office and raised_finding.text not in at_home
    assert fixed.status_code == 302
    raised_finding.refresh_from_db()
    assert raised_finding.state != Finding.State.OPEN


def test_an_unknown_memory_is_404_and_a_deleted_one_falls_back_to_the_default(signed_in, office):
    assert signed_in.get("/knowledge/?memory=attic").status_code == 404

    signed_in.get("/knowledge/?memory=office")
    office.delete()
    signed_in.post("/knowledge/teach", {"text": LOFT})

    assert _taught_into(LOFT) == "home"


def test_the_picker_offers_only_the_memories_a_person_may_read(client, alice, home, office):
    from knowledge.models import Membership, Permission

    Membership.objects.create(memory=office, user=alice, permission=Permission.NONE)
    Memory.objects.create(slug="garden", name="Garden")
    client.force_login(alice)

    html = client.get("/knowledge/").content.decode()

    picker = re.search(r'<select id="memory-picker".*?</select>', html, flags=re.DOTALL).group()
    assert "Garden" in picker and "Home" in picker and "Office" not in picker


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_person_switches_memory_and_the_page_acts_on_the_one_in_view(signed_in_page):
    Memory.objects.default()
    office = Memory.objects.create(slug="office", name="Office")
    page = signed_in_page
    page.goto("/knowledge/")

    page.get_by_label("Memory", exact=True).select_option("office")
    page.wait_for_url(re.compile(r"memory=office"))
    page.get_by_label("Teach it something").fill(LOFT)
    page.get_by_role("button", name="Teach").click()

    expect(page.locator("#teach [data-taught]")).to_contain_text(LOFT)  # Teach says it
    expect(page.locator("#waiting")).to_contain_text(LOFT)  # the poll read Office's queue
    assert _taught_into(LOFT) == "office"
    assert InboxItem.objects.filter(memory=office).count() == 1

    page.goto("/findings/")  # the session keeps Office across tabs
    expect(page.get_by_label("Memory", exact=True)).to_have_value("office")


@pytest.mark.parametrize(
    "headers", [{"HTTP_X_BRAIN_MEMORY": "off\x00ice"}, {"HTTP_X_BRAIN_MEMORY": "ofﬁce"}]
)
def test_a_memory_named_with_characters_no_slug_has_is_not_found_not_a_500(signed_in, headers):
    response = signed_in.get("/knowledge/", **headers)

    assert response.status_code == 404
