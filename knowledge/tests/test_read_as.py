"""Read as: an administrator switches the reader to a role or a person and sees exactly what
they see, everywhere, with a banner saying whose view it is."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from knowledge.models import Role
from knowledge.tests import examples


@pytest.fixture
def team(db):
    return examples.team()


def test_an_administrator_reading_as_hr_sees_only_what_hr_sees_on_every_page(client, team):
    client.force_login(team.admin)
    hr = Role.objects.get(memory=team.memory, name="HR")
    client.post(reverse("knowledge:read-as"), {"role": hr.pk, "memory": "team"})

    pages = client.get(reverse("knowledge:pages"), {"memory": "team"}).content.decode()
    assert "You are reading as <strong>the role HR</strong>" in pages
    assert "Luca Bianchi" in pages and "Rossi Srl" not in pages
    api = client.get(reverse("knowledge-api:facts"), {"memory": "team", "status": "all"}).json()
    assert [row["text"] for row in api["results"]] == ["Salary: €45,000."]
    source = client.get(reverse("knowledge:source", args=[team.source.pk]), {"memory": "team"})
    assert "Rossi Srl signed" not in source.content.decode()

    client.post(reverse("knowledge:read-as"), {"memory": "team"})  # stop
    api = client.get(reverse("knowledge-api:facts"), {"memory": "team", "status": "all"}).json()
    assert len(api["results"]) == 4


def test_reading_as_a_person_reads_with_their_roles(client, team):
    client.force_login(team.admin)
    client.post(reverse("knowledge:read-as"), {"person": "giulia", "memory": "team"})
    api = client.get(reverse("knowledge-api:facts"), {"memory": "team", "status": "all"}).json()
    assert "Salary: €45,000." not in [row["text"] for row in api["results"]]
    assert len(api["results"]) == 3


def test_only_an_administrator_may_read_as_someone_else(client, team):
    client.force_login(team.sales_reader)
    hr = Role.objects.get(memory=team.memory, name="HR")
    refused = client.post(reverse("knowledge:read-as"), {"role": hr.pk, "memory": "team"})
    assert refused.status_code == 403


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_read_as_in_a_browser_shows_the_banner_and_the_roles_view_until_stopped(page, password):
    team = examples.team()
    team.admin.set_password(password)
    team.admin.save()
    from brain.tests.pages import sign_in

    sign_in(page, team.admin.username, password)
    page.goto("/sources/pages/?memory=team")
    expect(page.locator("#pages")).to_contain_text("Rossi Srl")
    page.locator("#read-as select[name=role]").select_option(label="HR")
    page.locator("#read-as").get_by_role("button", name="Read as").click()

    expect(page.locator("#reading-as")).to_contain_text("You are reading as the role HR")
    expect(page.locator("#pages")).not_to_contain_text("Rossi Srl")
    expect(page.locator("#pages")).to_contain_text("Luca Bianchi")
    page.locator("#reading-as").get_by_role("button", name="Stop reading as").click()
    expect(page.locator("#reading-as")).to_have_count(0)
    expect(page.locator("#pages")).to_contain_text("Rossi Srl")
