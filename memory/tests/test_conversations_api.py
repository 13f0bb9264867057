"""POST /api/conversations/: a finished conversation kept whole and reflected on once, with a
clear 4xx for everything it refuses and nothing half-written."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from knowledge.models import Fact, Membership, Permission, Source
from memory import conversations, reflection
from memory.models import InboxItem, ReflectionRun

URL = "/api/conversations/"


@pytest.fixture
def sarah(django_user_model):
    return django_user_model.objects.create_user(username="sarah", first_name="Sarah")


@pytest.fixture
def token(alice):
    return Token.objects.create(user=alice).key


def post(client, body, **headers):
    return client.post(URL, json.dumps(body), content_type="application/json", **headers)


def bedroom(**extra) -> dict:
    return {
        "channel": "voice",
        "messages": [
            {"speaker": "Sarah", "text": "I like the bedroom at 19", "at": "2026-11-30T21:04:00Z"},
            {"speaker": "brain", "text": "Got it.", "at": "2026-11-30T21:04:02Z"},
        ],
        **extra,
    }


def test_a_conversation_posted_with_a_token_is_kept_whole_and_reflected_on(
    client, alice, token, home, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as sent:
        response = post(client, bedroom(), HTTP_AUTHORIZATION=f"Token {token}")

    assert response.status_code == 201, response.json()
    body = response.json()
    source = Source.objects.get(pk=body["id"])
    assert source.kind == Source.Kind.CONVERSATION and source.channel == "voice"
    assert source.text == "Sarah: I like the bedroom at 19\nbrain: Got it."
    assert [turn["speaker"] for turn in source.turns] == ["Sarah", "brain"]
    assert source.title.startswith("Voice conversation with Sarah, 30 Nov 2026")
    assert body["url"] == reverse("knowledge:source", args=[source.pk])
    assert len(sent) == 1  # the reflection's start message, after commit
    run = ReflectionRun.objects.get()
    reflection.execute(run.pk)  # what the worker does with it
    fact = Fact.objects.get()
    assert fact.text == "Sarah likes the bedroom at 19."
    assert fact.source == source


def test_the_signed_in_person_is_named_by_username_and_teaches_what_they_said(
    client, admin_user, sarah, home
):
    client.force_login(admin_user)
    response = post(client, bedroom(person="sarah"))

    assert response.status_code == 201
    reflection.execute(ReflectionRun.objects.get().pk)
    assert Fact.objects.get().taught_by == sarah
    assert response.json()["person"] == "sarah"


def test_naming_someone_else_as_signed_in_needs_administer(client, alice, sarah, home):
    client.force_login(alice)  # teach, by default

    response = post(client, bedroom(person="sarah"))

    assert response.status_code == 403
    assert not Source.objects.exists()


def test_the_same_conversation_posted_twice_is_one_source_and_one_reflection(
    client, alice, home, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks() as sent:
        first = post(client, bedroom())
        second = post(client, bedroom())
        third = post(client, bedroom(reference="ha-conv-1"))
        fourth = post(client, bedroom(reference="ha-conv-1"))
    for run in ReflectionRun.objects.all():
        reflection.execute(run.pk)
        reflection.execute(run.pk)  # delivered twice: nothing more

    assert [first.status_code, second.status_code] == [201, 200]
    assert first.json()["id"] == second.json()["id"]
    assert "already kept" in second.json()["detail"]
    assert [third.status_code, fourth.status_code] == [201, 200]
    assert Source.objects.count() == 2
    assert ReflectionRun.objects.count() == len(sent) == 2  # one per conversation
    assert Fact.objects.get().support == 2  # the second conversation said it again


def test_a_conversation_posted_again_with_more_messages_reflects_on_only_the_new_ones(
    client, alice, home
):
    client.force_login(alice)
    post(client, bedroom(reference="ha-conv-2"))
    longer = bedroom(reference="ha-conv-2")
    longer["messages"].append({"speaker": "Sarah", "text": "I prefer tea after dinner"})

    response = post(client, longer)

    assert response.status_code == 201
    assert response.json()["messages"] == 3
    assert list(ReflectionRun.objects.values_list("since_turn", flat=True).order_by("pk")) == [
        0,
        2,
    ]


def test_the_same_reference_with_other_messages_is_a_409(client, alice, home):
    client.force_login(alice)
    post(client, bedroom(reference="ha-conv-3"))
    other = bedroom(reference="ha-conv-3")
    other["messages"][0]["text"] = "I like the bedroom at 17"

    response = post(client, other)

    assert response.status_code == 409
    assert "other messages" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"channel": "voice", "messages": []}, "empty"),
        ({"channel": "fax", "messages": [{"text": "hi"}]}, "Unknown channel 'fax'"),
        ({"channel": "voice", "messages": [{"text": "hi", "role": "robot"}]}, "unknown role"),
        ({"channel": "voice", "messages": [{"text": "hi", "at": "yesterday"}]}, "ISO 8601"),
        ({"channel": "voice", "messages": [{"text": "   "}]}, "text"),
        ({"channel": "voice"}, "messages"),
        ({"channel": "voice", "messages": [{"text": "hi"}], "person": "nobody"}, "Nobody"),
    ],
)
def test_bad_conversations_are_a_400_naming_the_problem(client, alice, home, body, words):
    client.force_login(alice)

    response = post(client, body)

    assert response.status_code == 400
    assert words in json.dumps(response.json())
    assert not Source.objects.exists()


def test_five_thousand_messages_are_accepted_and_one_more_is_refused_naming_the_limit(
    client, alice, home
):
    client.force_login(alice)
    lines = [{"speaker": "Sarah", "text": f"Turn on lamp {n}"} for n in range(4999)]
    lines.append({"speaker": "Sarah", "text": "I like tea"})

    accepted = post(client, {"channel": "chat", "messages": lines})
    refused = post(client, {"channel": "chat", "messages": [*lines, {"text": "one more"}]})

    assert accepted.status_code == 201
    assert accepted.json()["messages"] == 5000
    assert refused.status_code == 413
    assert "5,001 messages" in refused.json()["detail"]
    assert "at most 5,000" in refused.json()["detail"]
    assert Source.objects.count() == 1


def test_two_megabytes_of_words_are_accepted_and_more_is_refused_naming_the_limit(
    client, alice, home
):
    client.force_login(alice)
    block = "é" * 1000  # two bytes a character, six in the JSON body (\\u00e9)
    lines = [{"speaker": "Sarah", "text": block} for _ in range(conversations.MAX_BYTES // 2000)]

    accepted = post(client, {"channel": "chat", "messages": lines})
    refused = post(client, {"channel": "chat", "messages": [*lines, {"text": "x" * 5000}]})

    assert accepted.status_code == 201, accepted.content[:200]
    assert refused.status_code == 413
    assert "at most 2,097,152 (2 MB)" in refused.json()["detail"]


def test_a_body_past_the_conversation_limit_is_a_413_before_it_is_read(client, alice, home):
    client.force_login(alice)
    huge = {"channel": "chat", "messages": [{"text": "x" * (9 * 1024 * 1024)}]}

    response = post(client, huge)

    assert response.status_code == 413
    assert "8 MiB" in response.json()["detail"]


def test_other_endpoints_still_refuse_a_body_over_one_mebibyte(client, alice, home):
    client.force_login(alice)

    response = client.post(
        "/api/memory/add", json.dumps({"fact": "x" * (2 * 1024 * 1024)}), "application/json"
    )

    assert response.status_code == 413
    assert "1 MiB" in response.json()["detail"]


def test_reading_only_members_may_not_post_a_conversation(client, alice, home):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    client.force_login(alice)

    response = post(client, bedroom())

    assert response.status_code == 403
    assert not Source.objects.exists()


def test_with_learning_off_the_conversation_is_kept_but_nothing_is_reflected(
    client, alice, home, django_capture_on_commit_callbacks
):
    home.learning = False
    home.save(update_fields=["learning"])
    client.force_login(alice)

    with django_capture_on_commit_callbacks() as sent:
        response = post(client, bedroom())

    assert response.status_code == 201
    assert sent == []
    assert not ReflectionRun.objects.exists()
    assert not InboxItem.objects.exists()


def test_a_conversation_reads_back_with_its_reflections(client, alice, home):
    client.force_login(alice)
    created = post(client, bedroom()).json()
    reflection.execute(ReflectionRun.objects.get().pk)

    response = client.get(f"{URL}{created['id']}/")

    assert response.status_code == 200
    [run] = response.json()["reflections"]
    assert run["state"] == "filed"
    assert run["filed"][0]["text"] == "Sarah likes the bedroom at 19."
    assert (
        run["message"] == "Learned 1 fact from the conversation: “Sarah likes the bedroom at 19.”."
    )
