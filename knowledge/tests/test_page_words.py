"""Pages and Sources in plain words: a page linked through two facts is listed once, a line is
quoted once, and the labels a new source takes are said in a sentence."""

import re

from django.urls import reverse

from knowledge.models import Label, Subject
from memory import actions
from memory.taught import Statement


def test_a_page_linked_through_two_facts_is_listed_once_and_quotes_are_never_doubled(
    signed_in, home
):
    tom = Subject.objects.create(memory=home, kind="person", name="Tom")
    kitchen = Subject.objects.create(memory=home, kind="room", name="Kitchen")
    for text in (
        "Tom cooks in the kitchen on Mondays.",
        "Tom keeps the kitchen radio on.",
        "“The office” means the kitchen corner Tom uses.",
    ):
        actions.learn(
            Statement.typed(memory=home, text=text, origin="typed", subjects=[tom.pk, kitchen.pk])
        )

    page = signed_in.get(reverse("knowledge:page", args=[tom.pk])).content.decode()
    links = re.search(r'<section class="card" id="page-links">.*?</section>', page, re.S).group()

    assert links.count(f'data-linked="{kitchen.pk}"') == 1
    assert "through “Tom cooks in the kitchen on Mondays.”" in links
    assert "through “Tom keeps the kitchen radio on.”" in links
    assert "““" not in page
    assert "through “‘The office’ means the kitchen corner Tom uses.”" in links


def test_the_labels_a_new_source_takes_are_said_in_a_sentence(signed_in, home):
    Label.objects.create(memory=home, name="Household", default=True)
    Label.objects.create(memory=home, name="Health")

    page = signed_in.get(reverse("knowledge:sources")).content.decode()

    assert "Labels (none:" not in page
    assert "<legend>Who may read it</legend>" in page
    assert "Tick none and it is labelled Household, as every new source is." in page
