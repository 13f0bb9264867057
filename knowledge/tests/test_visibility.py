"""The read rules of seed 001 on its own example: meeting-notes.pdf, Sales and HR."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from knowledge import actions, pages, passages, search, visibility
from knowledge.models import Citation, Conflict, Fact, LabelSet, Memory, Passage, Source
from knowledge.read_layer import SYSTEM
from knowledge.tests import examples


@pytest.fixture
def team(db):
    return examples.team()


def _texts(facts):
    return sorted(fact.text for fact in facts)


def _facts(team, reader):
    return _texts(
        Fact.objects.as_system("the test reads its memory")
        .for_memory(team.memory)
        .readable_by(reader)
    )


def test_a_sales_reader_reads_the_order_and_who_follows_the_account_but_not_the_salary(team):
    assert _facts(team, team.sales_reader) == [
        "Follows the Rossi Srl account.",
        "Order of €50,000 confirmed, delivery in June.",
        "The account is followed by Luca Bianchi since March.",
    ]


def test_an_hr_reader_reads_only_the_salary(team):
    assert _facts(team, team.hr_reader) == ["Salary: €45,000."]


def test_an_administrator_the_system_and_a_superuser_read_all_four(team, admin_user):
    for reader in (team.admin, SYSTEM, admin_user):
        assert len(_facts(team, reader)) == 4


def test_passages_are_read_through_their_labels(team):
    def read(reader):
        readable = Passage.objects.for_memory(team.memory).readable_by(reader)
        return sorted(p.ordinal for p in readable)

    assert read(team.sales_reader) == [0, 1]
    assert read(team.hr_reader) == [2]
    assert read(team.admin) == [0, 1, 2]


def test_pages_exist_for_a_reader_only_through_facts_they_read(team):
    def existing(reader):
        return [p.name for p in pages.readable_pages(team.memory, reader)]

    assert existing(team.sales_reader) == ["Luca Bianchi", "Rossi Srl"]
    assert existing(team.hr_reader) == ["Luca Bianchi"]
    assert pages.page(team.rossi, team.hr_reader) is None


def test_a_page_shows_a_reader_only_the_facts_they_read(team):
    luca_for_sales = pages.page(team.luca, team.sales_reader)
    luca_for_hr = pages.page(team.luca, team.hr_reader)
    assert _texts(luca_for_sales.facts) == ["Follows the Rossi Srl account."]
    assert _texts(luca_for_hr.facts) == ["Salary: €45,000."]
    assert _texts(pages.page(team.luca, team.admin).facts) == [
        "Follows the Rossi Srl account.",
        "Salary: €45,000.",
    ]


def test_links_are_seen_through_a_readable_fact_that_names_a_page_that_exists(team):
    def links(page, reader):
        shown = pages.page(page, reader)
        return [] if shown is None else [(ln.fact.text, ln.page.name) for ln in shown.links]

    assert links(team.rossi, team.sales_reader) == [
        ("The account is followed by Luca Bianchi since March.", "Luca Bianchi")
    ]
    assert links(team.luca, team.sales_reader) == [("Follows the Rossi Srl account.", "Rossi Srl")]
    assert links(team.luca, team.hr_reader) == []  # the fact that names Rossi Srl cites Sales


def test_a_source_is_listed_for_anyone_who_reads_one_of_its_passages(team, django_user_model):
    stranger = django_user_model.objects.create_user(username="stranger")
    listed = Source.objects.filter(memory=team.memory)
    assert listed.readable_by(team.sales_reader).get() == team.source
    assert listed.readable_by(team.hr_reader).get() == team.source
    assert not listed.readable_by(stranger).exists()


def test_a_conflict_is_read_only_by_who_reads_the_passages_of_both_sides(team):
    Conflict.objects.create(memory=team.memory, old=team.order, new=team.followed, reason="test")
    mixed = Conflict.objects.create(
        memory=team.memory, old=team.followed, new=team.salary, reason="test"
    )
    conflicts = Conflict.objects.for_memory(team.memory)
    assert conflicts.readable_by(team.sales_reader).count() == 1
    assert not conflicts.readable_by(team.hr_reader).exists()
    assert mixed in conflicts.readable_by(team.admin)


def test_a_fact_citing_passages_of_two_labels_is_read_only_by_who_reads_both(team):
    both = examples._fact(
        team.memory, team.luca, "Luca's pay follows the Rossi order.", team.passages[1:]
    )
    readable = Fact.objects.filter(pk=both.pk)
    assert not readable.readable_by(team.sales_reader).exists()
    assert not readable.readable_by(team.hr_reader).exists()
    team.hr_reader.brain_roles.add(*team.sales.roles.all())
    assert readable.readable_by(team.hr_reader).exists()


def test_relabelling_a_passage_moves_every_fact_that_cites_it_at_once(team):
    passages.set_labels([team.passages[1]], [team.hr])
    assert _facts(team, team.sales_reader) == ["Order of €50,000 confirmed, delivery in June."]
    assert len(_facts(team, team.hr_reader)) == 3
    assert LabelSet.objects.filter(labels=[team.hr.pk]).count() == 1  # interned: one row


def test_a_passage_with_no_label_is_read_by_administrators_only(team):
    passages.set_labels([team.passages[0]], [])
    assert "Order of €50,000 confirmed, delivery in June." not in _facts(team, team.sales_reader)
    assert len(_facts(team, team.admin)) == 4
    assert Fact.objects.get(pk=team.order.pk).label_sets == [0]


def test_a_fact_that_cites_nothing_is_read_by_administrators_only(team):
    Citation.objects.filter(fact=team.order).delete()
    assert Fact.objects.get(pk=team.order.pk).label_sets == []
    assert "Order of €50,000 confirmed, delivery in June." not in _facts(team, team.sales_reader)
    assert len(_facts(team, SYSTEM)) == 4


def test_a_fact_can_never_cite_a_passage_of_another_memory(team):
    other = Memory.objects.create(slug="other", name="Other")
    elsewhere = Source.objects.create(memory=other, kind=Source.Kind.NOTE, title="n", text="x")
    (stray,) = passages.add(elsewhere, ["The lodger pays in cash."])
    with pytest.raises(IntegrityError, match="own memory"), transaction.atomic():
        passages.cite(team.order, [stray])


def test_an_inactive_or_signed_out_person_reads_nothing(team):
    from django.contrib.auth.models import AnonymousUser

    team.sales_reader.is_active = False
    assert _facts(team, team.sales_reader) == []
    assert _facts(team, AnonymousUser()) == []


def test_reading_as_a_role_reads_what_its_holders_read(team):
    sales = visibility.as_role(team.sales.roles.get())
    assert _facts(team, sales) == _facts(team, team.sales_reader)


def test_the_read_rule_is_one_predicate_on_the_facts_own_row(team):
    """Raw SQL (search.readable_where) takes the rule as it is: no join on another table."""
    from knowledge import search

    readable = (
        Fact.objects.as_system("the test reads its memory")
        .for_memory(team.memory)
        .live()
        .readable_by(team.hr_reader)
    )
    where, params = search.readable_where(readable)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT text FROM knowledge_fact WHERE {where}", params)
        assert [row[0] for row in cursor.fetchall()] == ["Salary: €45,000."]


def test_a_memory_nobody_labelled_reads_as_it_always_did(home, alice):
    """Household, granted to the Everyone role every member holds: everyone reads it."""
    fact = actions.file_fact(
        memory=home, text="The loft is warm.", channel="typed", kind="note", by=alice
    )
    assert Fact.objects.filter(pk=fact.pk).readable_by(alice).exists()
    assert [label.name for label in fact.passages.get().labels.all()] == ["Household"]


def test_the_page_view_shows_a_reader_their_facts_with_citations_and_links(client, team):
    client.force_login(team.sales_reader)
    rossi = client.get(reverse("knowledge:page", args=[team.rossi.pk]), {"memory": "team"})
    body = rossi.content.decode()
    assert rossi.status_code == 200
    assert "Order of €50,000 confirmed" in body and "meeting-notes.pdf ¶1" in body
    assert reverse("knowledge:page", args=[team.luca.pk]) in body  # the link to Luca Bianchi
    listed = client.get(reverse("knowledge:pages"), {"memory": "team"}).content.decode()
    assert "Rossi Srl" in listed and "Luca Bianchi" in listed

    client.force_login(team.hr_reader)
    assert client.get(reverse("knowledge:page", args=[team.rossi.pk])).status_code == 404
    luca = client.get(reverse("knowledge:page", args=[team.luca.pk])).content.decode()
    assert "Salary: €45,000." in luca and "Follows the Rossi Srl account." not in luca
    assert (
        "Rossi Srl"
        not in client.get(reverse("knowledge:pages"), {"memory": "team"}).content.decode()
    )


def test_a_readable_set_sharing_its_mask_bit_with_an_unreadable_one_is_still_read(team):
    """The rule's mask (migration 0020) is a shortcut only: two sets 64 ids apart share a bit,
    and the fact is then judged on its array."""
    from knowledge import read_rule
    from knowledge.models import Label

    hr_set = LabelSet.objects.get(labels=[team.hr.pk]).pk
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('knowledge_labelset', 'id'), %s)", [hr_set + 63]
        )
    ops = Label.objects.create(memory=team.memory, name="Ops", meaning="Deliveries.")
    passages.set_labels([team.passages[0]], [team.sales, ops])
    order = Fact.objects.get(pk=team.order.pk)
    assert order.label_sets == [hr_set + 64]
    scope = read_rule.scope_of(team.sales_reader)
    assert order.set_mask & scope.unreadable_mask  # the bit of HR's set, which Sales cannot read

    assert "Order of €50,000 confirmed, delivery in June." in _facts(team, team.sales_reader)
    assert "Order of €50,000 confirmed, delivery in June." not in _facts(team, team.hr_reader)
    assert (
        Fact.objects.as_system("the test reads its memory")
        .for_memory(team.memory)
        .readable_by(team.sales_reader)
        .count()
        == 3
    )


def test_the_databases_mask_of_label_sets_is_the_one_the_scope_makes(db):
    from knowledge import read_rule

    for ids in ([], [0], [1, 2, 3], [0, 63], [63, 64, 127, 128], [5, 69, 1000]):
        with connection.cursor() as cursor:
            cursor.execute("SELECT knowledge_set_mask(%s::bigint[])", [ids])
            assert cursor.fetchone()[0] == read_rule.set_mask(ids), ids


@pytest.mark.parametrize("walk", [1, 10_000], ids=["a walk of one fact", "a walk of all"])
def test_a_full_text_tier_that_walks_reads_only_what_the_reader_may_read(team, monkeypatch, walk):
    """A tier of common words walks the memory's newest facts in the index ``fact_words``
    before it asks the full-text index (knowledge/search.py): the read rule applies there too."""
    monkeypatch.setattr(search, "WALK", walk)
    monkeypatch.setattr(search, "_walking", lambda words: [True] * len(search._tiers(words)))
    memory = team.memory
    found = {}
    for reader in (team.sales_reader, team.hr_reader, team.admin, SYSTEM):
        readable = (
            Fact.objects.as_system("the test reads its memory")
            .for_memory(memory)
            .live()
            .readable_by(reader)
        )
        for question in ("Who follows the Rossi account?", "What is the salary?", "June order"):
            text = search.candidates(memory, readable, subject_ids=[], question=question, limit=40)
            plain = search.text_matches(readable.only("pk"), question, 40)
            assert text.text == [fact.pk for fact in plain]
            found[reader, question] = _texts(Fact.objects.filter(pk__in=text.text))

    assert found[team.sales_reader, "What is the salary?"] == []
    assert found[team.hr_reader, "What is the salary?"] == ["Salary: €45,000."]
    assert found[team.hr_reader, "June order"] == []
    assert "Order of €50,000 confirmed, delivery in June." in found[SYSTEM, "June order"]


def test_the_observations_admin_lists_only_those_of_facts_the_reader_may_read(client, team):
    team.sales_reader.is_staff = True
    team.sales_reader.save()
    client.force_login(team.sales_reader)

    page = client.get("/admin/knowledge/observation/").content.decode()

    assert "Order of €50,000 confirmed" in page
    assert "Follows the Rossi Srl account." in page
    assert "Salary" not in page
