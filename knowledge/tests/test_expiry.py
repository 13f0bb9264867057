"""Facts that expire: health notes after thirty days, and facts about an entity the house no
longer has, deleted thirty days after it went unless it comes back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from knowledge import tasks
from knowledge.actions import expire_facts, purge_removed_subject_facts, set_subject_presence
from knowledge.models import Fact, Memory, Subject
from memory.actions import learn
from memory.models import InboxItem
from memory.taught import Statement

BATTERY = "The hall sensor's battery is at 12%."
FLICKER = "The office lamp flickers when the heater runs."
BEACON = "The beacon is on a smart plug."
LIKES = "Sarah prefers the bedroom warm at night."
LOFT = "The loft hatch sticks in winter."


@pytest.fixture
def lamp(home) -> Subject:
    return Subject.objects.create(
        memory=home,
        kind=Subject.Kind.DEVICE,
        name="Office lamp",
        entity_id="light.office_lamp",
        aliases=["the beacon"],
    )


def teach(memory: Memory, text: str) -> Fact:
    return learn(Statement.typed(memory=memory, text=text, origin="typed")).fact


def live_texts(memory: Memory, **kwargs) -> set[str]:
    return set(Fact.objects.for_memory(memory).live(**kwargs).values_list("text", flat=True))


def days(n: int):
    return timezone.now() + timedelta(days=n)


# Health notes ---------------------------------------------------------------------------------


def test_a_health_note_is_used_for_thirty_days_and_then_expires(home):
    note = teach(home, BATTERY)
    assert note.kind == Fact.Kind.HEALTH_NOTE

    assert live_texts(home, now=days(29)) == {BATTERY}
    assert expire_facts(now=days(29)) == 0
    assert live_texts(home, now=days(31)) == set()

    assert expire_facts(now=days(31)) == 1
    note.refresh_from_db()
    assert note.status == Fact.Status.EXPIRED
    assert live_texts(home) == set()
    assert expire_facts(now=days(32)) == 0  # safe to run twice


def test_a_preference_never_expires(home):
    preference = teach(home, LIKES)
    assert preference.kind == Fact.Kind.PREFERENCE

    assert expire_facts(now=days(365)) == 0
    assert live_texts(home, now=days(365)) == {LIKES}


# Entities the house no longer has -------------------------------------------------------------


def test_facts_about_an_entity_gone_over_thirty_days_are_deleted_and_not_before(home, lamp):
    teach(home, FLICKER)
    teach(home, BEACON)
    teach(home, LOFT)
    set_subject_presence(subject=lamp, present=False)
    assert live_texts(home) == {LOFT}

    assert purge_removed_subject_facts(now=days(29)) == 0
    assert Fact.objects.count() == 3

    assert purge_removed_subject_facts(now=days(31)) == 2
    assert list(Fact.objects.values_list("text", flat=True)) == [LOFT]
    # The inbox keeps its lines; they just no longer point at a fact.
    assert InboxItem.objects.filter(fact__isnull=True).count() == 2


def test_an_entity_that_came_back_keeps_its_facts_past_thirty_days(home, lamp):
    teach(home, FLICKER)
    set_subject_presence(subject=lamp, present=False)
    set_subject_presence(subject=lamp, present=True)

    assert purge_removed_subject_facts(now=days(31)) == 0
    assert live_texts(home, now=days(31)) == {FLICKER}


# The beat -------------------------------------------------------------------------------------


def test_the_hourly_expiry_task_expires_health_notes_and_purges_long_gone_entities(home, lamp):
    note = teach(home, BATTERY)
    teach(home, FLICKER)
    teach(home, LIKES)
    Fact.objects.filter(pk=note.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    set_subject_presence(subject=lamp, present=False)
    Subject.objects.filter(pk=lamp.pk).update(removed_at=days(-31))

    tasks.apply_expiry()

    note.refresh_from_db()
    assert note.status == Fact.Status.EXPIRED
    assert not Fact.objects.filter(text=FLICKER).exists()
    assert live_texts(home) == {LIKES}


def test_the_home_assistant_task_does_nothing_until_it_is_configured(home, settings):
    settings.HA_URL, settings.HA_TOKEN = "http://127.0.0.1:9", ""

    tasks.sync_home_assistant()

    assert not Subject.objects.exists()


def test_the_beat_runs_expiry_hourly_and_the_home_assistant_sync_every_15_minutes():
    schedule = django_settings.CELERY_BEAT_SCHEDULE

    assert schedule["knowledge-expiry"] == {"task": tasks.apply_expiry.name, "schedule": 3600.0}
    assert schedule["knowledge-home-assistant-sync"] == {
        "task": tasks.sync_home_assistant.name,
        "schedule": 900.0,
    }
