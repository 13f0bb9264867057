"""Settings (/settings/): an operator's settings for one memory, each with a line saying what it
does, readable by those who read the memory and changed by those who administer it; none of them
on the household's Knowledge tab."""

import re

import pytest
from django.urls import reverse

from knowledge.models import Membership, Memory, Permission

SECTIONS = (
    "switches",
    "document-size",
    "core",
    "model-routes",
    "workers",
    "health",
    "people",
    "retention",
)


@pytest.fixture
def member(client, alice, home):
    """Alice, a household member who may teach."""
    Membership.objects.create(memory=home, user=alice, permission=Permission.TEACH)
    client.force_login(alice)
    return client


def test_every_setting_is_on_the_settings_page_with_a_line_saying_what_it_does(signed_in, home):
    page = signed_in.get(reverse("settings:page")).content.decode()

    for section in SECTIONS:
        region = re.search(rf'<section[^>]*id="{section}".*?</section>', page, flags=re.S)
        assert region, section
        assert 'class="meta"' in region.group() or 'class="muted"' in region.group(), section
    assert "You administer this memory" in page
    assert 'name="learning"' in page and 'name="memory_max_kb"' in page
    assert 'name="provider:reflect"' in page and 'id="core-text"' in page
    for shortcut in ("Who may do what", "Labels", "Roles", "Page types", "Worker tokens"):
        assert f">{shortcut}</a>" in page
    assert f"/admin/knowledge/label/?in_memory={home.pk}" in page


def test_the_knowledge_tab_keeps_none_of_the_operators_settings(signed_in, home):
    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    for region in ('id="switches"', 'id="core"', 'id="model-routes"', 'id="workers"'):
        assert region not in page
    assert "distil_failures" not in page and "write_gate" not in page


def test_a_household_member_reads_the_settings_but_changes_none_and_has_no_tab(member, home):
    page = member.get(reverse("settings:page")).content.decode()
    knowledge = member.get(reverse("memory:knowledge")).content.decode()

    assert "You may read these settings" in page
    assert 'name="learning"' not in page and 'name="memory_max_kb"' not in page
    assert "The document may hold <strong>32 KB</strong>" in page
    assert 'href="/settings/"' not in knowledge  # the tab is offered to administrators
    refused = member.post(reverse("memory:document-size"), {"memory_max_kb": "8"})
    assert refused.status_code == 403
    assert Memory.objects.get(pk=home.pk).memory_max_kb == 32


def test_an_administrator_sets_the_documents_size_with_or_without_javascript(signed_in, home):
    htmx = signed_in.post(
        reverse("memory:document-size"), {"memory_max_kb": "16"}, headers={"HX-Request": "true"}
    )
    assert 'id="document-size"' in htmx.content.decode()
    assert "The document may now hold 16 KB." in htmx.headers["HX-Trigger"]
    assert Memory.objects.get(pk=home.pk).memory_max_kb == 16

    plain = signed_in.post(reverse("memory:document-size"), {"memory_max_kb": "99"}, follow=True)

    assert plain.redirect_chain[-1][0] == "/settings/#document-size"
    assert "a whole number of KB from 1 to 64" in plain.content.decode()
    assert Memory.objects.get(pk=home.pk).memory_max_kb == 16


def test_the_working_tile_on_house_opens_settings_in_plain_words(signed_in, home):
    house = signed_in.get(reverse("home")).content.decode()
    settings_page = signed_in.get(reverse("settings:page")).content.decode()

    assert 'href="/settings/#health" data-number="worker"' in house
    assert 'href="/healthz"' not in house
    health = re.search(r'<section id="health".*?</section>', settings_page, flags=re.S).group()
    assert "The database, where everything brain knows is kept." in health
    assert "Working" in health


def test_the_settings_tab_is_offered_to_administrators_beside_admin(signed_in):
    page = signed_in.get(reverse("home")).content.decode()
    nav = re.search(r'<nav class="tabs" aria-label="Main">.*?</nav>', page, flags=re.S).group()

    assert re.findall(r">(\w+)(?: <span|</a>)", nav) == [
        "House",
        "Knowledge",
        "Findings",
        "Sources",
        "Pages",
        "Settings",
        "Admin",
    ]
    assert 'class="operator">Settings' in nav
