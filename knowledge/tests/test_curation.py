"""Curating pages and facts: merge two pages, split a page, edit a fact — each one change in the
log that undo reverses, from the page view, the API and the change log's own undo."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from knowledge import pages
from knowledge.models import Fact, Subject
from knowledge.tests import examples
from memory import curation, fact_edits, revisions
from memory.models import Change


@pytest.fixture
def team(db):
    team = examples.team()
    # A second page for Luca, made by a compile that did not know the first: "L. Bianchi".
    team.twin = Subject.objects.create(
        memory=team.memory, kind="person", name="L. Bianchi", aliases=["lb"]
    )
    team.moved = examples._fact(
        team.memory, team.twin, "Speaks Italian and German.", [team.passages[1]]
    )
    return team


def _facts(page: Subject) -> list[str]:
    return sorted(Fact.objects.filter(subjects=page).values_list("text", flat=True))


def _undo(change: Change, by) -> Change:
    return revisions.undo_change(memory=change.memory, number=change.number, by=by)


# Merging ---------------------------------------------------------------------------------------


def test_merging_moves_the_facts_and_the_merged_names_become_nicknames(team):
    done = curation.merge_pages(keep=team.luca, merged=team.twin, by=team.admin)

    team.luca.refresh_from_db()
    assert not Subject.objects.filter(pk=team.twin.pk).exists()
    assert _facts(team.luca) == [
        "Follows the Rossi Srl account.",
        "Salary: €45,000.",
        "Speaks Italian and German.",
    ]
    assert team.luca.aliases == ["l. bianchi", "lb"]
    assert done.change.summary == "Merged page “L. Bianchi” into “Luca Bianchi”"
    assert done.change.source == Change.Source.CURATION
    assert done.message == (
        "Merged “L. Bianchi” into “Luca Bianchi”: 1 fact moved; it is also called “l. bianchi”, "
        f"“lb” now. Change #{done.change.number} in the log undoes it."
    )


def test_a_link_naming_the_merged_page_still_resolves_to_the_page_kept(team):
    naming = examples._fact(
        team.memory, team.rossi, "L. Bianchi visits Rossi Srl monthly.", [team.passages[1]]
    )
    curation.merge_pages(keep=team.luca, merged=team.twin, by=team.admin)

    shown = pages.page(team.rossi, team.sales_reader)

    assert (naming, team.luca) in [(link.fact, link.page) for link in shown.links]


def test_undoing_a_merge_puts_the_page_back_with_its_facts_and_names(team):
    done = curation.merge_pages(keep=team.luca, merged=team.twin, by=team.admin)

    undo = _undo(done.change, team.admin)

    twin = Subject.objects.get(pk=team.twin.pk)
    team.luca.refresh_from_db()
    assert (twin.name, twin.aliases, twin.kind) == ("L. Bianchi", ["lb"], "person")
    assert _facts(twin) == ["Speaks Italian and German."]
    assert _facts(team.luca) == ["Follows the Rossi Srl account.", "Salary: €45,000."]
    assert team.luca.aliases == []
    assert undo.summary == f"Undid change #{done.change.number}: {done.change.summary}"
    done.change.refresh_from_db()
    assert done.change.undone_by == undo
    with pytest.raises(revisions.CannotUndo, match="already undone"):
        _undo(done.change, team.admin)


def test_a_page_cannot_be_merged_with_itself(team):
    with pytest.raises(Exception, match="cannot be merged with itself"):
        curation.merge_pages(keep=team.luca, merged=team.luca, by=team.admin)
    assert not Change.objects.exists()


# Splitting -------------------------------------------------------------------------------------


def test_splitting_moves_the_chosen_facts_to_a_new_page_and_undo_moves_them_back(team):
    done = curation.split_page(
        page=team.luca, facts=[team.salary.pk], name="Luca's pay", kind="topic", by=team.admin
    )

    new = done.page
    assert (new.name, new.kind) == ("Luca's pay", "topic")
    assert _facts(new) == ["Salary: €45,000."]
    assert _facts(team.luca) == ["Follows the Rossi Srl account."]
    # Who reads it is unchanged: the new page exists for HR only, through the fact it holds.
    assert pages.page(new, team.hr_reader) is not None
    assert pages.page(new, team.sales_reader) is None

    _undo(done.change, team.admin)

    assert not Subject.objects.filter(pk=new.pk).exists()
    assert _facts(team.luca) == ["Follows the Rossi Srl account.", "Salary: €45,000."]


@pytest.mark.parametrize(
    ("facts", "name", "kind", "said"),
    [
        ([], "Pay", "topic", "Choose the facts"),
        (["order"], "Pay", "topic", "is not on “Luca Bianchi”"),
        (["salary"], "  ", "topic", "Name the new page"),
        (["salary"], "Pay", "planet", "not 'planet'"),
        (["salary"], "Rossi Srl", "company", "There is already a company page"),
    ],
)
def test_a_split_that_cannot_be_done_says_why_and_changes_nothing(team, facts, name, kind, said):
    chosen = [getattr(team, fact).pk for fact in facts]
    with pytest.raises(ValidationError, match=said):
        curation.split_page(page=team.luca, facts=chosen, name=name, kind=kind, by=team.admin)
    assert _facts(team.luca) == ["Follows the Rossi Srl account.", "Salary: €45,000."]
    assert not Change.objects.exists()


# Editing a fact --------------------------------------------------------------------------------


def test_an_edited_fact_keeps_its_citations_and_so_who_reads_it(team):
    edited = fact_edits.edit_fact(fact=team.salary, text="Salary: €46,000.", by=team.admin)

    new = edited.fact
    assert list(new.passages.all()) == [team.passages[2]]
    assert list(new.subjects.all()) == [team.luca]
    readable = Fact.objects.filter(pk=new.pk)
    assert readable.readable_by(team.hr_reader).exists()
    assert not readable.readable_by(team.sales_reader).exists()
    assert edited.change.summary == (
        f"Edited fact #{team.salary.pk}: “Salary: €45,000.” now reads “Salary: €46,000.”"
    )


def test_undoing_an_edit_brings_the_old_words_back(team):
    edited = fact_edits.edit_fact(fact=team.salary, text="Salary: €46,000.", by=team.admin)

    _undo(edited.change, team.admin)

    shown = pages.page(team.luca, team.hr_reader)
    assert [fact.text for fact in shown.facts] == ["Salary: €45,000."]
    assert Fact.objects.get(pk=edited.fact.pk).status == Fact.Status.FORGOTTEN


# Every surface ---------------------------------------------------------------------------------


def test_the_page_view_offers_an_administrator_merge_split_and_edit(client, team):
    url = reverse("knowledge:page", args=[team.luca.pk])
    client.force_login(team.admin)
    html = client.get(url).content.decode()
    assert reverse("memory:merge-pages", args=[team.luca.pk]) in html
    assert reverse("memory:split-page", args=[team.luca.pk]) in html
    assert reverse("memory:edit-fact", args=[team.salary.pk]) in html

    client.force_login(team.hr_reader)
    html = client.get(url).content.decode()
    assert 'id="page-curate"' not in html and "memory:edit-fact" not in html
    assert reverse("memory:edit-fact", args=[team.salary.pk]) not in html


def test_merging_from_the_page_view_goes_back_to_the_page_with_what_happened(client, team):
    client.force_login(team.admin)
    url = reverse("knowledge:page", args=[team.luca.pk])

    answer = client.post(
        reverse("memory:merge-pages", args=[team.luca.pk]), {"merged": team.twin.pk}
    )

    assert answer.status_code == 302 and answer.url == url
    html = client.get(url).content.decode()
    assert "Merged “L. Bianchi” into “Luca Bianchi”" in html
    assert "Speaks Italian and German." in html and "Also called l. bianchi, lb" in html


def test_splitting_and_editing_from_the_page_view(client, team):
    client.force_login(team.admin)
    url = reverse("knowledge:page", args=[team.luca.pk])

    split = client.post(
        reverse("memory:split-page", args=[team.luca.pk]),
        {"facts": [team.salary.pk], "name": "Pay", "kind": "topic"},
    )
    new = Subject.objects.get(name="Pay")
    assert split.url == reverse("knowledge:page", args=[new.pk])
    edit = client.post(
        reverse("memory:edit-fact", args=[team.follows.pk]),
        {"text": "Follows the Rossi Srl account since March.", "next": url},
    )
    assert edit.url == url
    html = client.get(url).content.decode()
    assert "Follows the Rossi Srl account since March." in html
    assert "Salary" not in html


def test_a_curator_who_does_not_administer_is_refused(client, team):
    team.memory.memberships.create(user=team.sales_reader, permission=3)  # curate
    client.force_login(team.sales_reader)
    for url, data in (
        (reverse("memory:merge-pages", args=[team.luca.pk]), {"merged": team.twin.pk}),
        (reverse("memory:edit-fact", args=[team.follows.pk]), {"text": "Gone."}),
        (f"/api/memory/pages/{team.luca.pk}/merge?memory=team", {"merged": team.twin.pk}),
    ):
        assert client.post(url, data).status_code == 403, url
    assert Subject.objects.filter(pk=team.twin.pk).exists()


def test_the_api_merges_splits_and_edits_and_the_log_undoes_each(client, team):
    client.force_login(team.admin)
    api = "/api/memory"

    merged = client.post(
        f"{api}/pages/{team.luca.pk}/merge?memory=team",
        {"merged": team.twin.pk},
        content_type="application/json",
    )
    split = client.post(
        f"{api}/pages/{team.luca.pk}/split?memory=team",
        {"facts": [team.salary.pk], "name": "Pay", "kind": "topic"},
        content_type="application/json",
    )
    edited = client.post(
        f"{api}/facts/{team.order.pk}/edit?memory=team",
        {"text": "Order of €52,000 confirmed, delivery in June."},
        content_type="application/json",
    )

    for answer in (merged, split, edited):
        assert answer.status_code == 200, answer.content
    assert split.json()["page"] == Subject.objects.get(name="Pay").pk
    for answer in (edited, split, merged):
        number = answer.json()["change"]
        undone = client.post(f"{api}/changes/{number}/undo?memory=team")
        assert undone.status_code == 200, undone.content
    assert _facts(team.luca) == ["Follows the Rossi Srl account.", "Salary: €45,000."]
    assert _facts(Subject.objects.get(pk=team.twin.pk)) == ["Speaks Italian and German."]
    assert _facts(team.rossi)[0] == "Order of €50,000 confirmed, delivery in June."
    assert Fact.objects.get(pk=team.order.pk).is_live
    bad = client.post(
        f"{api}/pages/{team.luca.pk}/merge?memory=team",
        {"merged": team.luca.pk},
        content_type="application/json",
    )
    assert bad.status_code == 409


# The admin's subjects list -----------------------------------------------------------------


def test_the_admin_lists_to_a_curator_only_the_pages_that_exist_for_them(client, team):
    team.memory.memberships.create(user=team.hr_reader, permission=3)  # curate
    team.hr_reader.is_staff = True
    team.hr_reader.save()
    client.force_login(team.hr_reader)

    html = client.get(reverse("admin:knowledge_subject_changelist")).content.decode()

    assert "Luca Bianchi" in html
    assert "Rossi Srl" not in html and "L. Bianchi" not in html
    assert '<td class="field-facts_read">1</td>' in html  # the salary; not the Sales fact
    client.force_login(team.admin)
    team.admin.is_staff = True
    team.admin.save()
    html = client.get(reverse("admin:knowledge_subject_changelist")).content.decode()
    assert "Rossi Srl" in html and "L. Bianchi" in html
