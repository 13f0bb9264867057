"""The Knowledge tab in plain words: how sure brain is in words, where a fact came from, no
setting's code, the document without empty headings, chips named after the memory's pages,
and Teach saying what it did."""

import re

from django.urls import reverse

from knowledge.models import Memory, PageType, Subject
from memory import actions, consolidator
from memory.taught import Statement
from surfaces.views.knowledge import without_empty_sections

HTMX = {"HX-Request": "true"}


def _visible(page: str) -> str:
    return re.sub(r"<[^>]+>", " ", page.split("<main", 1)[1])


def test_a_fact_says_how_sure_brain_is_in_words_with_the_number_on_hover(signed_in, home):
    actions.learn(
        Statement.said(memory=home, text="The loft is warm.", origin="voice", confidence="high")
    )

    page = signed_in.get(reverse("memory:knowledge")).content.decode()
    text = _visible(page)

    assert 'title="Confidence 0.80 of 1">sure</span>' in page
    assert "confidence 0." not in text
    assert "Where it came from" in text and "See the run" not in text
    assert "memory_max_kb" not in text


def test_the_document_shows_no_empty_heading():
    text = "# Memory\n\n## House\n\n## People\n\n- Sarah is a light sleeper.\n\n## Rooms\n"
    assert without_empty_sections(text) == "# Memory\n\n## People\n\n- Sarah is a light sleeper."
    assert without_empty_sections("# Memory\n\n## House\n\n## Rooms\n").strip() == ""
    nested = "# Memory\n## Rooms\n### Loft\n\n## People\n- Tom.\n"
    assert without_empty_sections(nested) == "# Memory\n\n## People\n- Tom."


def test_a_garden_shed_memory_is_shown_in_its_own_words(signed_in):
    shed = Memory.objects.create(slug="shed", name="Garden shed")
    PageType.objects.create(memory=shed, key="device", name="Tool")
    place = Subject.objects.create(memory=shed, kind="house", name="The shed")
    mower = Subject.objects.create(memory=shed, kind="device", name="Mower")
    actions.learn(
        Statement.typed(
            memory=shed, text="The shed door sticks.", origin="typed", subjects=[place.pk]
        )
    )
    actions.learn(
        Statement.typed(
            memory=shed, text="The mower needs oil.", origin="typed", subjects=[mower.pk]
        )
    )
    run = consolidator.request_consolidation(memory=shed, trigger="cli", send=False).run
    consolidator.execute(run.pk)

    page = signed_in.get(reverse("memory:knowledge"), {"memory": "shed"}).content.decode()
    chips = re.findall(r'name="chip" value="(\w*)"[^>]*>([^<]+)</label>', page)
    document = re.search(r'<div class="prose">(.*?)</div>', page, flags=re.S).group(1)

    assert chips == [
        ("", "Everything"),
        ("house", "The shed"),
        ("device", "Tools"),
        ("rules", "Rules you set"),
    ]
    # The sections the document files under are the composer's; the empty ones are not shown.
    for heading in ("People", "Preferences", "Routines", "Rules"):
        assert f">{heading}<" not in document, heading


def test_teach_says_in_its_box_what_it_did(signed_in, home):
    taught = signed_in.post(
        reverse("memory:teach"), {"text": "Guests sleep in the loft."}, headers=HTMX
    ).content.decode()
    again = signed_in.post(
        reverse("memory:teach"), {"text": "Guests sleep in the loft."}, headers=HTMX
    ).content.decode()

    assert 'role="status" data-taught>brain learned “Guests sleep in the loft.”' in taught
    assert "brain already knew that: “Guests sleep in the loft.” has now been said 2 times" in (
        again
    )
    assert "#" not in re.sub(r"<[^>]+>|&#x?\w+;", "", taught)
