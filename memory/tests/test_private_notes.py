"""A household with a private note: Sarah's health note is never in what Tom is given, on any
surface (context, the facts list, search, the API, export, the MCP server), nor in the memory
document everyone reads; Sarah reads it everywhere."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from knowledge import retrieval
from knowledge.models import Fact, Label, Membership, Permission, Role, Source
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

PRIVATE = "Sarah takes metformin every morning with breakfast."
SHARED = "The bins go out on Tuesday night."
WORD = "metformin"


@pytest.fixture
def household(home, django_user_model):
    return _household(home, django_user_model)


def _household(home, django_user_model) -> dict:
    """Sarah and Tom may both curate; Sarah alone holds the role that reads "Private to
    Sarah", which her note carries. Everything else is Household, which everyone reads."""
    sarah = django_user_model.objects.create_user(username="sarah", password="x")
    tom = django_user_model.objects.create_user(username="tom", password="x")
    for person in (sarah, tom):
        Membership.objects.create(memory=home, user=person, permission=Permission.CURATE)
    actions.learn(Statement.typed(memory=home, text=SHARED, origin=Origin.TYPED, by=tom))
    private = Label.objects.create(
        memory=home, name="Private to Sarah", meaning="Sarah's own health and medical notes."
    )
    role = Role.objects.create(memory=home, name="Sarah")
    role.labels.add(private)
    role.members.add(sarah)
    note = Source.objects.create(
        memory=home, kind=Source.Kind.NOTE, title="Sarah's health note", added_by=sarah
    )
    note.labels.add(private)
    learned = actions.learn(
        Statement.typed(memory=home, text=PRIVATE, origin=Origin.TYPED, by=sarah, source=note)
    )
    return {"sarah": sarah, "tom": tom, "note": note, "fact": learned.fact}


def _as(client, person):
    client.force_login(person)
    return client


def test_tom_is_never_given_sarahs_note_in_context_and_sarah_is(home, household):
    question = "What does Sarah take with breakfast every morning?"
    for_tom = retrieval.context(memory=home, question=question, reader=household["tom"])
    for_sarah = retrieval.context(memory=home, question=question, reader=household["sarah"])
    assert WORD not in for_tom.text
    assert WORD in for_sarah.text
    plain = retrieval.plain_context(memory=home, question=question, reader=household["tom"])
    assert WORD not in plain.text


def test_tom_never_finds_sarahs_note_by_searching(home, household):
    question = "metformin breakfast"
    found = retrieval.retrieve(memory=home, question=question, reader=household["tom"])
    assert [fact.text for fact in found if WORD in fact.text] == []
    found = retrieval.retrieve(memory=home, question=question, reader=household["sarah"])
    assert PRIVATE in [fact.text for fact in found]


def test_the_facts_list_and_the_api_never_show_tom_sarahs_note(client, home, household):
    _as(client, household["tom"])
    page = client.get(reverse("memory:knowledge"))
    assert page.status_code == 200
    assert WORD not in page.content.decode() and SHARED.rstrip(".") in page.content.decode()
    listed = client.get(reverse("knowledge-api:facts"), {"q": WORD, "status": "all"}).json()
    assert listed["results"] == []
    fact = household["fact"]
    assert client.get(reverse("knowledge-api:fact", args=[fact.pk])).status_code == 404
    block = client.post(
        reverse("knowledge-api:context"), {"question": "Sarah morning"}, "application/json"
    ).json()
    assert WORD not in block["text"]
    waiting = client.get(reverse("memory-api:inbox")).json()
    assert all(WORD not in item["text"] for item in waiting)

    _as(client, household["sarah"])
    listed = client.get(reverse("knowledge-api:facts"), {"q": WORD}).json()
    assert [row["text"] for row in listed["results"]] == [PRIVATE]


def test_toms_export_holds_only_what_tom_reads(client, home, household):
    tom_export = _as(client, household["tom"]).get(reverse("memory-api:export"))
    assert tom_export.status_code == 200
    assert WORD not in tom_export.content.decode()
    assert SHARED in tom_export.content.decode()
    sarah_export = _as(client, household["sarah"]).get(reverse("memory-api:export")).json()
    assert PRIVATE in {fact["text"] for fact in sarah_export["facts"]}


def test_toms_sources_never_open_sarahs_note(client, home, household):
    _as(client, household["tom"])
    assert client.get(reverse("knowledge:source", args=[household["note"].pk])).status_code == 404
    assert household["note"].title not in client.get(reverse("knowledge:sources")).content.decode()
    _as(client, household["sarah"])
    opened = client.get(reverse("knowledge:source", args=[household["note"].pk]))
    assert opened.status_code == 200 and WORD in opened.content.decode()


def test_the_document_everyone_reads_never_holds_the_note_and_the_pass_says_so(home, household):
    request = consolidator.request_consolidation(
        memory=home, trigger=ConsolidationRun.Trigger.CLI, send=False
    )
    consolidator.execute(request.run.pk)
    run = ConsolidationRun.objects.get(pk=request.run.pk)

    revision = DocumentRevision.objects.current(home)
    assert run.state == ConsolidationRun.State.FILED, run.reason
    assert SHARED.rstrip(".") in revision.text
    assert WORD not in revision.text and WORD not in revision.voice
    assert "1 fact kept out of the document: not everyone in the memory may read it." in (
        run.reason
    )
    fact = Fact.objects.get(pk=household["fact"].pk)
    assert (fact.status, fact.in_document, fact.is_live) == ("filed", False, True)
    assert not InboxItem.objects.for_memory(home).pending().exists()
    block = retrieval.context(memory=home, question="Sarah breakfast", reader=household["sarah"])
    assert WORD in block.text  # kept out of the document, not forgotten


@pytest.mark.django_db(transaction=True)
def test_the_mcp_server_for_tom_never_answers_with_sarahs_note(django_user_model):
    from knowledge.models import Memory
    from memory.tests.test_mcp import drive

    _household(Memory.objects.default(), django_user_model)

    seen: dict = {}

    async def scenario(agent, tools) -> None:
        seen["search"] = await agent.call("memory_search", query="metformin breakfast", k=10)
        seen["context"] = await agent.call("memory_context", goal="What does Sarah take?")

    drive(scenario, "--user", "tom")
    assert WORD not in json.dumps(seen)
    drive(scenario, "--user", "sarah")
    assert WORD in json.dumps(seen["search"])


def test_an_export_carries_the_labels_so_the_note_stays_sarahs_in_another_memory(home, household):
    from knowledge.models import Memory
    from surfaces import portable

    data = json.loads(portable.export_json(home, reader=SYSTEM))
    assert {label["name"] for label in data["labels"]["labels"]} >= {"Private to Sarah"}
    other = Memory.objects.create(slug="other", name="Other")
    portable.import_memory(other, data)

    moved = Fact.objects.for_memory(other).get(text=PRIVATE)
    assert not Fact.objects.filter(pk=moved.pk).readable_by(household["tom"]).exists()
    assert Fact.objects.filter(pk=moved.pk).readable_by(household["sarah"]).exists()
    shared = Fact.objects.for_memory(other).get(text=SHARED)
    assert Fact.objects.filter(pk=shared.pk).readable_by(household["tom"]).exists()
    again = portable.import_memory(other, data)  # a second import changes nothing
    assert any(line.startswith("Passages: 0 added") for line in again)


def test_what_tom_teaches_is_never_judged_against_sarahs_note_nor_names_it(home, household):
    """The gate reads only what the teacher reads: Tom's "every evening" would otherwise retire
    Sarah's private "every morning", and his answer would quote it."""
    said = "Sarah takes metformin every evening with dinner."

    learned = actions.learn(
        Statement.typed(memory=home, text=said, origin=Origin.TYPED, by=household["tom"])
    )

    note = Fact.objects.get(pk=household["fact"].pk)
    assert note.valid_to is None and note.superseded_by is None
    assert "morning" not in learned.message
    assert f"#{note.pk}" not in learned.message
    assert learned.verdict == "novel"
    again = actions.learn(
        Statement.typed(memory=home, text=PRIVATE, origin=Origin.TYPED, by=household["tom"])
    )
    assert again.fact.pk != note.pk  # not "already known": Tom cannot see that one
    assert Fact.objects.get(pk=note.pk).support == 1
