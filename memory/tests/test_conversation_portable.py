"""A conversation travels with the export: its messages and the turn that taught each fact, so
See the run still opens it at that turn on the new install."""

from __future__ import annotations

import json

import pytest

from knowledge.models import Fact, Memory, Observation, Source
from knowledge.portable import ImportRejected
from knowledge.read_layer import SYSTEM
from memory import conversations, reflection
from surfaces import portable


@pytest.fixture
def reflected(home):
    source = conversations.record_conversation(
        memory=home,
        channel="voice",
        messages=[
            {"speaker": "Sarah", "text": "Good evening"},
            {"speaker": "Sarah", "text": "I like the bedroom at 19"},
        ],
        reference="ha-conversation-7",
    ).source
    reflection.reflect(source)
    return source


def test_an_imported_conversation_keeps_its_messages_and_the_turn_that_taught(home, reflected):
    other = Memory.objects.create(slug="cabin", name="Cabin")

    portable.import_memory(other, portable.parse(portable.export_json(home, reader=SYSTEM)))

    copied = Source.objects.get(memory=other)
    assert copied.turns == reflected.turns and copied.channel == "voice"
    assert copied.reference == "ha-conversation-7"
    taught = Observation.objects.get(fact__memory=other)
    assert (taught.source, taught.turn) == (copied, 1)


def test_importing_twice_keeps_one_conversation(home, reflected):
    other = Memory.objects.create(slug="cabin", name="Cabin")
    data = portable.export_json(home, reader=SYSTEM)

    portable.import_memory(other, portable.parse(data))
    portable.import_memory(other, portable.parse(data))

    assert Source.objects.filter(memory=other).count() == 1
    assert Fact.objects.filter(memory=other).count() == 1


def test_turns_that_are_not_messages_are_refused_naming_them(home, reflected):
    data = json.loads(portable.export_json(home, reader=SYSTEM))
    data["facts"][0]["source"]["turns"] = ["not a message"]

    with pytest.raises(ImportRejected, match='invalid "turns"'):
        portable.parse(json.dumps(data))
