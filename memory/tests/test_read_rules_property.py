"""The read rules against a brute-force reference, on every surface, for generated memories.

Hypothesis draws labels, roles (each granting some labels), people (each holding some roles,
some administering the memory), passages (each with some labels, possibly none) and facts
(each citing one to three passages). The reference says, from those sets alone, what each
person may read: a passage when one of their roles grants one of its labels, a fact when they
may read every passage it cites; administrators everything. Some facts are derived, as a study
session files a conclusion: from one to three of the others, citing every passage those cite,
so read only by whoever reads all of them. Then every surface is asked as that person: the facts
list (queryset, HTML and API), the admin's list of facts, search, context(), export and the MCP
tools.
Lists must match the reference exactly; search and context() pick among what matches, so what
they give must be inside it.
"""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import actions, listing, passages, retrieval
from knowledge.embedding import get_embedder
from knowledge.models import (
    Fact,
    Label,
    Membership,
    Memory,
    Passage,
    Permission,
    Role,
    Source,
    Subject,
)
from knowledge.read_layer import SYSTEM
from memory import mcp_server
from memory.actions import learn
from memory.models import Origin
from memory.taught import Statement
from surfaces import portable

WORDS = ["amber", "basil", "cedar", "delta", "ember", "fjord", "gorse", "heron", "iris", "juniper"]
_numbers = itertools.count()
# What a study might conclude: sentences the gate keeps apart from each other and the facts.
CONCLUSIONS = (
    "Gadget deliveries arrive on Tuesday mornings.",
    "The blue ledger is kept beside the fire exit.",
    "Quarterly audits need two signatures from finance.",
)


@st.composite
def memories(draw):
    labels = draw(st.integers(1, 4))
    label_sets = st.frozensets(st.integers(0, labels - 1), max_size=labels)
    roles = draw(st.lists(label_sets, min_size=1, max_size=3))
    people = draw(
        st.lists(
            st.tuples(st.frozensets(st.integers(0, len(roles) - 1)), st.booleans()),
            min_size=1,
            max_size=3,
        )
    )
    passage_labels = draw(st.lists(label_sets, min_size=1, max_size=6))
    facts = draw(
        st.lists(
            st.frozensets(st.integers(0, len(passage_labels) - 1), min_size=1, max_size=3),
            min_size=1,
            max_size=6,
        )
    )
    derived = draw(
        st.lists(st.frozensets(st.integers(0, len(facts) - 1), min_size=1, max_size=3), max_size=3)
    )
    return labels, roles, people, passage_labels, [*facts, *_cited_by(facts, derived)], derived


def _cited_by(facts, derived):
    """Each derived fact as the passages it cites: every passage of the facts it rests on."""
    return [frozenset().union(*(facts[n] for n in rests_on)) for rests_on in derived]


def _reads(person, roles, passage_labels, passage: int) -> bool:
    held, administers = person
    if administers:
        return True
    granted = set().union(*(roles[r] for r in held)) if held else set()
    return bool(granted & passage_labels[passage])


def _build(spec):
    labels_n, roles_spec, people_spec, passage_labels, facts_spec, derived = spec
    number = next(_numbers)
    memory = Memory.objects.create(slug=f"drawn-{number}", name=f"Drawn {number}")
    labels = [Label.objects.create(memory=memory, name=f"L{n}") for n in range(labels_n)]
    roles = []
    for n, granted in enumerate(roles_spec):
        role = Role.objects.create(memory=memory, name=f"R{n}")
        role.labels.set([labels[i] for i in granted])
        roles.append(role)
    people = []
    for n, (held, administers) in enumerate(people_spec):
        person = get_user_model().objects.create_user(username=f"p{number}-{n}", is_staff=True)
        for r in held:
            roles[r].members.add(person)
        permission = Permission.ADMINISTER if administers else Permission.CURATE
        Membership.objects.create(memory=memory, user=person, permission=permission)
        people.append(person)
    source = Source.objects.create(memory=memory, kind=Source.Kind.DOCUMENT, title="Drawn")
    rows = []
    for n, chosen in enumerate(passage_labels):
        (row,) = passages.add(source, [f"Passage {n}."], labels=[labels[i] for i in chosen])
        rows.append(row)
    page = Subject.objects.create(memory=memory, kind="topic", name="Widgets")
    embedder = get_embedder()
    facts = []
    for n, cited in enumerate(facts_spec[: len(facts_spec) - len(derived)]):
        text = f"The widget {WORDS[n % len(WORDS)]} {WORDS[(3 * n + 1) % len(WORDS)]} {n}."
        facts.append(
            actions.file_fact(
                memory=memory,
                text=text,
                channel=Fact.Channel.API,
                kind=Fact.Kind.NOTE,
                subjects=[page],
                cites=[rows[i] for i in cited],
                embedding=embedder.embed_one(text),
                embedder=embedder.name,
            )
        )
    study = Source.objects.create(memory=memory, kind=Source.Kind.STUDY, title="A study")
    for n, rests_on in enumerate(derived):
        # As a study session files a conclusion: citing every passage its facts cite.
        cites = Passage.objects.as_system("what the facts cite").filter(
            facts__in=[facts[i] for i in rests_on]
        )
        facts.append(
            learn(
                Statement.derived(
                    memory=memory,
                    text=CONCLUSIONS[n],
                    origin=Origin.STUDY,
                    source=study,
                    cites=list(cites.distinct()),
                    reader=SYSTEM,
                )
            ).fact
        )
    return memory, people, rows, facts, page


@pytest.mark.django_db
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=memories())
def test_every_surface_reads_exactly_what_the_reference_says(spec):
    _, roles_spec, people_spec, passage_labels, facts_spec, _derived = spec
    with transaction.atomic():
        memory, people, rows, facts, page = _build(spec)
        for person, person_spec in zip(people, people_spec, strict=True):
            passages_read = {
                rows[n].pk
                for n in range(len(rows))
                if _reads(person_spec, roles_spec, passage_labels, n)
            }
            expected = {
                fact.pk
                for fact, cited in zip(facts, facts_spec, strict=True)
                if all(_reads(person_spec, roles_spec, passage_labels, n) for n in cited)
            }
            texts = {fact.pk: fact.text for fact in facts}
            _check(memory, person, expected, passages_read, texts, page)
        transaction.set_rollback(True)


def _check(memory, person, expected: set[int], passages_read: set[int], texts, page) -> None:
    shown = f"for {person.username}"
    readable = Passage.objects.for_memory(memory).readable_by(person)
    assert set(readable.values_list("pk", flat=True)) == passages_read, shown
    listed = listing.facts_for(memory, person, listing.FactFilters(status="all"))
    assert {fact.pk for fact in listed} == expected, shown
    assert Subject.objects.filter(pk=page.pk).readable_by(person).exists() == bool(expected)
    assert Source.objects.filter(memory=memory).readable_by(person).exists() == bool(passages_read)

    client = Client()
    client.force_login(person)
    api = client.get(
        reverse("knowledge-api:facts"), {"memory": memory.slug, "status": "all", "page_size": 200}
    )
    assert {row["id"] for row in api.json()["results"]} == expected, shown
    html = client.get(
        reverse("memory:facts"),
        {"memory": memory.slug, "status": "all"},
        headers={"HX-Request": "true"},
    )
    assert html.status_code == 200
    body = html.content.decode()
    for pk, text in texts.items():
        assert (text in body) == (pk in expected), f"{shown}: {text} on the facts list"

    found = retrieval.retrieve(memory=memory, question="widget", reader=person, k=50)
    assert {fact.pk for fact in found} <= expected, shown
    block = retrieval.context(memory=memory, question="widget", reader=person, token_budget=4000)
    assert set(block.fact_ids) <= expected, shown
    assert all(texts[pk] not in block.text for pk in set(texts) - expected), shown

    if person.is_staff:  # the admin opens for staff only
        admin_list = client.get(
            reverse("admin:knowledge_fact_changelist"), {"memory__id__exact": memory.pk}
        ).content.decode()
        for pk, text in texts.items():
            assert (text in admin_list) == (pk in expected), f"{shown}: {text} in the admin"

    exported = portable.export_memory(memory, reader=person)
    assert {entry["text"] for entry in exported["facts"]} == {texts[pk] for pk in expected}

    serving = mcp_server.Serving(memory, person)
    searched = mcp_server.search(serving, "widget", 50)
    assert {fact["id"] for fact in searched["facts"]} <= expected, shown
    given_block = mcp_server.context(serving, "widget", 4000)
    assert set(given_block["fact_ids"]) <= expected, shown
