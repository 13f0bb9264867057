"""See the run: a fact learned in a conversation opens that conversation, turn by turn, at the
turn that taught it; the reflection says what it filed or why it filed nothing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from knowledge import provenance
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory import actions, conversations, reflection
from memory.models import Origin
from memory.taught import Statement


@pytest.fixture
def sarah(django_user_model):
    return django_user_model.objects.create_user(username="sarah", first_name="Sarah")


def _reflected(home, person, *lines):
    source = conversations.record_conversation(
        memory=home,
        channel="voice",
        person=person,
        messages=[{"speaker": speaker, "text": text} for speaker, text in lines],
    ).source
    reflection.reflect(source)
    return source


def _highlighted(html: str) -> list[str]:
    return re.findall(r'<li id="(turn-\d+)" class="[^"]*\btaught\b', html)


def test_see_the_run_on_a_fact_opens_its_conversation_at_the_turn_that_taught_it(
    client, admin_user, home, sarah
):
    source = _reflected(
        home,
        sarah,
        ("Sarah", "Good evening"),
        ("brain", "Evening, Sarah."),
        ("Sarah", "I like the bedroom at 19"),
        ("brain", "Noted."),
    )
    fact = Fact.objects.get()
    client.force_login(admin_user)

    facts_list = client.get(reverse("memory:knowledge")).content.decode()
    link = f"{reverse('knowledge:source', args=[source.pk])}?fact={fact.pk}"
    page = client.get(link)

    assert f'href="{link}"' in facts_list  # See the run
    html = page.content.decode()
    assert page.status_code == 200
    assert _highlighted(html) == ["turn-2"]
    assert "Good evening" in html and "Evening, Sarah." in html
    assert "Learned 1 fact from the conversation" in html
    assert provenance.explain(fact, reader=SYSTEM)["source"]["url"] == link
    assert provenance.explain(fact, reader=SYSTEM)["source"]["turn"] == 2


def test_a_conversation_that_taught_something_again_shows_it_at_its_own_turn(
    client, admin_user, home, sarah
):
    first = _reflected(home, sarah, ("Sarah", "I like the bedroom at 19"))
    again = _reflected(home, sarah, ("Sarah", "Hello"), ("Sarah", "I like the bedroom at 19"))
    fact = Fact.objects.get()
    client.force_login(admin_user)

    page = client.get(reverse("knowledge:source", args=[again.pk]), {"fact": fact.pk})

    assert fact.source == first and fact.support == 2
    assert _highlighted(page.content.decode()) == ["turn-1"]


def test_a_long_conversation_shows_the_turns_around_the_one_that_taught(
    client, admin_user, home, sarah
):
    lines = [("Sarah", f"Turn on lamp {n}") for n in range(1000)]
    lines[10] = ("Sarah", "I like the bedroom at 19")
    source = conversations.record_conversation(
        memory=home,
        channel="chat",
        person=sarah,
        messages=[{"speaker": s, "text": t} for s, t in lines],
    ).source
    reflection.reflect(source, since_turn=0)  # the newest 40 hold nothing
    actions.learn(
        Statement.said(
            memory=home,
            text="Sarah likes the bedroom at 19.",
            origin=Origin.CHAT,
            source=source,
            turn=10,
            by=sarah,
        )
    )
    fact = Fact.objects.get()
    client.force_login(admin_user)

    html = client.get(
        reverse("knowledge:source", args=[source.pk]), {"fact": fact.pk}
    ).content.decode()

    assert _highlighted(html) == ["turn-10"]
    assert "Showing messages 1–200 of 1000." in html
    assert "Turn on lamp 999" not in html


def test_a_conversation_nobody_may_read_a_fact_of_is_not_found(client, admin_user, home, sarah):
    source = _reflected(home, sarah, ("Sarah", "Turn off the kitchen"))
    client.force_login(admin_user)

    page = client.get(reverse("knowledge:source", args=[source.pk]))

    assert page.status_code == 404
