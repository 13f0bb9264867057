"""The tabs: one is current, the one the page belongs to; an address a person would type for a
tab leads to it."""

import re

from django.urls import reverse

from knowledge.models import Subject
from memory import actions
from memory.taught import Statement


def _current(page: str) -> list[str]:
    nav = re.search(r'<nav class="tabs" aria-label="Main">.*?</nav>', page, flags=re.S).group()
    return re.findall(r'aria-current="page"[^>]*>(\w+)', nav)


def test_one_tab_is_current_the_one_the_page_belongs_to(signed_in, home):
    kitchen = Subject.objects.create(memory=home, kind="room", name="Kitchen")
    actions.learn(
        Statement.typed(
            memory=home, text="The kitchen is warm.", origin="typed", subjects=[kitchen.pk]
        )
    )

    for path, tab in (
        (reverse("home"), "House"),
        (reverse("memory:knowledge"), "Knowledge"),
        (reverse("review:findings"), "Findings"),
        (reverse("review:timeline"), "Findings"),
        (reverse("knowledge:sources"), "Sources"),
        (reverse("knowledge:review"), "Sources"),
        (reverse("knowledge:pages"), "Pages"),
        (reverse("knowledge:page", args=[kitchen.pk]), "Pages"),
        (reverse("settings:page"), "Settings"),
    ):
        assert _current(signed_in.get(path).content.decode()) == [tab], path


def test_pages_where_a_person_would_type_it_leads_to_the_pages(signed_in, home):
    kitchen = Subject.objects.create(memory=home, kind="room", name="Kitchen")

    listed = signed_in.get("/pages/?memory=home")
    one = signed_in.get(f"/pages/{kitchen.pk}/")

    assert listed.status_code == 302
    assert listed["Location"] == reverse("knowledge:pages") + "?memory=home"
    assert one["Location"] == reverse("knowledge:page", args=[kitchen.pk])


def test_the_icon_is_found_where_a_browser_looks_for_it(client):
    answer = client.get("/favicon.ico")

    assert answer.status_code == 302 and answer["Location"].endswith("img/brain.svg")


def test_a_phone_has_a_menu_with_every_tab_and_who_is_signed_in(signed_in, admin_user):
    page = signed_in.get(reverse("home")).content.decode()
    menu = re.search(r'<details class="menu">.*?</details>', page, flags=re.S).group()

    for tab in ("House", "Knowledge", "Findings", "Sources", "Pages", "Settings", "Admin"):
        assert f">{tab}" in menu, tab
    assert f"Signed in as {admin_user.username}</span>" in menu
    assert '<summary class="button"' in menu
