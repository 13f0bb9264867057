"""The kill switches on the Knowledge tab: learning off stops everything that would add to
memory on its own — reflection, filing — while what is known is still used; memory_injection
off keeps learning and gives prompts nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from knowledge import retrieval
from knowledge.models import Membership, Memory, Permission
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator, conversations, reflection
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin, ReflectionRun
from memory.taught import Statement

HTMX = {"HX-Request": "true"}


def _switch(client, **on):
    data = {name: "on" for name, value in on.items() if value}
    return client.post(reverse("memory:switches"), data, headers=HTMX)


def _fresh(memory: Memory) -> Memory:
    return Memory.objects.get(pk=memory.pk)


def test_an_administrator_switches_learning_off_and_on_from_the_settings_page(signed_in, home):
    page = signed_in.get(reverse("settings:page")).content.decode()
    assert 'name="learning" checked' in page and 'name="memory_injection" checked' in page
    assert 'name="learning"' not in signed_in.get(reverse("memory:knowledge")).content.decode()

    off = _switch(signed_in, learning=False, memory_injection=True)

    assert off.status_code == 200
    assert 'name="learning" checked' not in off.content.decode()
    assert "Learning is off: nothing new is learned or filed" in off.headers["HX-Trigger"]
    assert _fresh(home).learning is False and _fresh(home).memory_injection is True
    _switch(signed_in, learning=True, memory_injection=True)
    assert _fresh(home).learning is True


def test_without_javascript_the_switches_form_comes_back_to_the_settings_page(signed_in, home):
    response = signed_in.post(reverse("memory:switches"), {"learning": "on"}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("settings:page") + "#switches"
    assert "Memory is not given to prompts" in response.content.decode()
    assert _fresh(home).memory_injection is False


def test_a_person_who_may_teach_sees_the_switches_but_may_not_change_them(client, alice, home):
    client.force_login(alice)

    page = client.get(reverse("settings:page")).content.decode()
    refused = _switch(client, learning=False)

    assert "Learning is <strong>on</strong>" in page
    assert 'name="learning"' not in page
    assert refused.status_code == 403
    assert _fresh(home).learning is True


def test_a_curator_may_not_change_them_either(client, alice, home):
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    client.force_login(alice)

    assert _switch(client, learning=False).status_code == 403


def test_learning_off_stops_reflection_and_filing_but_what_is_known_is_still_used(home):
    known = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    )
    consolidator.execute(
        consolidator.request_consolidation(memory=home, trigger="cli", send=False).run.pk
    )
    actions.learn(Statement.typed(memory=home, text="Guests use the loft.", origin=Origin.TYPED))
    source = conversations.record_conversation(
        memory=home, channel="voice", messages=[{"speaker": "Sarah", "text": "I like tea"}]
    ).source
    home.learning = False
    home.save(update_fields=["learning"])

    with pytest.raises(consolidator.LearningOff):
        consolidator.request_consolidation(memory=home, trigger="manual")
    with pytest.raises(reflection.switches.LearningOff):
        reflection.reflect(source)

    assert InboxItem.objects.pending().count() == 1  # left where it was
    assert "The loft is warm." in DocumentRevision.objects.current(home).text
    block = retrieval.context(memory=home, question="loft", reader=SYSTEM)
    assert f"[{known.fact.pk}] The loft is warm." in block.text


def test_a_pass_already_asked_for_when_learning_goes_off_keeps_the_queue(home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    run = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    Memory.objects.filter(pk=home.pk).update(learning=False)

    consolidator.execute(run.pk)

    run.refresh_from_db()
    assert run.state == ConsolidationRun.State.KEPT
    assert run.reason == consolidator.LEARNING_OFF
    assert InboxItem.objects.pending().count() == 1


def test_a_reflection_asked_for_when_learning_goes_off_files_nothing_and_says_so(home):
    source = conversations.record_conversation(
        memory=home, channel="voice", messages=[{"speaker": "Sarah", "text": "I like tea"}]
    ).source
    run = reflection.request_reflection(source)
    Memory.objects.filter(pk=home.pk).update(learning=False)

    reflection.execute(run.pk)

    run.refresh_from_db()
    assert run.state == ReflectionRun.State.NOTHING
    assert "learning was switched off" in run.reason
    assert not InboxItem.objects.exists()


def test_memory_in_prompts_off_keeps_learning_but_gives_prompts_nothing(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    _switch(signed_in, learning=True, memory_injection=False)

    assert retrieval.context(memory=_fresh(home), question="loft", reader=SYSTEM).text == ""
    assert actions.learn(
        Statement.typed(memory=_fresh(home), text="Guests use the loft.", origin="typed")
    ).item
