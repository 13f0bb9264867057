"""One Review queue: labelling doubts, conflicts and unplaced passages, each shown to whoever
may read what it is about, newest first, with its actions inline (htmx, or plain forms)."""

from __future__ import annotations

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge import passages, review_items
from knowledge.models import Passage, ReviewItem, Source
from knowledge.tests import examples
from knowledge.tests.test_conflicts_between_sources import sales_and_hr_disagree
from memory import actions

REVIEW = reverse("knowledge:review") + "?memory=team"
# The session and its person, the memory and the permission; the count and the items with their
# sources and conflict sides; the passages they name, and those passages' labels; the passages
# each side cites, and the pages each is about; the memory's labels (to label inline); the tabs'
# badges (findings, guesses) and the memory picker (grants, memories).
QUERIES_FOR_REVIEW = 16


@pytest.fixture
def team(db):
    return examples.team()


def unplaced(team, text: str, labels, *, ago: int = 0) -> ReviewItem:
    """A passage compiling placed on no page, asked about in Review."""
    source = Source.objects.create(
        memory=team.memory, kind=Source.Kind.NOTE, title=f"Note: {text[:20]}", text=text
    )
    (passage,) = passages.add(source, [text], labels=labels)
    item = ReviewItem.objects.create(
        memory=team.memory,
        kind=ReviewItem.Kind.UNPLACED,
        source=source,
        question=f"“{text}” was placed on no page.",
        created_at=timezone.now() - datetime.timedelta(minutes=ago),
    )
    item.passages.add(passage)
    return item


def doubt(team, text: str, *, ago: int = 0) -> ReviewItem:
    """The labeller could not place a passage: no label, administrators only, and it asks."""
    source = Source.objects.create(
        memory=team.memory, kind=Source.Kind.NOTE, title="Unsure note", text=text
    )
    (passage,) = passages.add(source, [text], labels=[])
    Passage.objects.filter(pk=passage.pk).update(unsure=True)
    item = ReviewItem.objects.create(
        memory=team.memory,
        kind=ReviewItem.Kind.LABELLING,
        source=source,
        question="1 passage of “Unsure note” could not be placed under its labels.",
        created_at=timezone.now() - datetime.timedelta(minutes=ago),
    )
    item.passages.add(passage)
    return item


def _kinds(items) -> list[str]:
    return [item.kind for item in items]


def test_the_administrator_sees_every_kind_newest_first(team):
    sales = unplaced(team, "Call Rossi back about the invoice.", [team.sales], ago=30)
    unsure = doubt(team, "Bonus rules for next year.", ago=20)
    conflict = sales_and_hr_disagree(team)

    queue = list(review_items.waiting(team.memory, team.admin))

    assert [item.pk for item in queue[1:]] == [unsure.pk, sales.pk]
    assert queue[0].conflict == conflict
    assert _kinds(queue) == ["conflict", "labelling", "unplaced"]


def test_each_reader_sees_only_the_items_they_may_read(team):
    unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    unplaced(team, "Marta's contract ends in June.", [team.hr])
    doubt(team, "Bonus rules for next year.")
    sales_and_hr_disagree(team)

    assert _kinds(review_items.waiting(team.memory, team.sales_reader)) == ["unplaced"]
    assert [i.question for i in review_items.waiting(team.memory, team.hr_reader)] == [
        "“Marta's contract ends in June.” was placed on no page."
    ]
    assert review_items.count(team.memory, team.admin) == 4


def test_the_review_page_lists_them_with_their_actions_and_a_reader_only_reads(client, team):
    item = unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    doubt(team, "Bonus rules for next year.")

    client.force_login(team.sales_reader)
    html = client.get(REVIEW).content.decode()
    assert "1 item waiting" in html
    assert "Call Rossi back about the invoice." in html
    assert "Bonus rules" not in html
    assert reverse("knowledge:review-leave", args=[item.pk]) not in html  # reads, no buttons

    client.force_login(team.admin)
    html = client.get(REVIEW).content.decode()
    assert "2 items waiting" in html
    assert reverse("knowledge:review-leave", args=[item.pk]) in html
    assert 'name="labels-' in html  # the doubt's passages, labelled inline


def test_the_pages_and_sources_tabs_link_to_review_with_a_count(client, team):
    unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    sales_and_hr_disagree(team)
    client.force_login(team.admin)
    for tab in ("knowledge:pages", "knowledge:sources"):
        html = client.get(reverse(tab) + "?memory=team").content.decode()
        assert f'href="{reverse("knowledge:review")}" data-review-waiting="2"' in html, tab
    client.force_login(team.sales_reader)
    html = client.get(reverse("knowledge:pages") + "?memory=team").content.decode()
    assert 'data-review-waiting="1"' in html


def test_labelling_a_doubt_inline_settles_it_and_its_facts_follow(client, team):
    item = doubt(team, "Rossi Srl asked for a discount.")
    (passage,) = item.passages.all()
    client.force_login(team.admin)

    answer = client.post(
        reverse("knowledge:review-labels", args=[item.pk]) + "?memory=team",
        {f"labels-{passage.pk}": ["Sales"]},
        headers={"HX-Request": "true"},
    )

    html = answer.content.decode()
    assert html.lstrip().startswith(f'<li id="review-item-{item.pk}"')
    assert "Settled by paolo." in html
    assert list(passage.labels.values_list("name", flat=True)) == ["Sales"]
    assert Passage.objects.filter(pk=passage.pk).readable_by(team.sales_reader).exists()
    assert not review_items.waiting(team.memory, team.admin).exists()


def test_leaving_an_item_works_without_javascript(client, team):
    item = unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    client.force_login(team.admin)

    answer = client.post(reverse("knowledge:review-leave", args=[item.pk]) + "?memory=team")

    assert answer.status_code == 302 and answer.url == reverse("knowledge:review")
    item.refresh_from_db()
    assert item.state == ReviewItem.State.SETTLED and item.settled_by == team.admin
    assert "Left as it is." in client.get(REVIEW).content.decode()


def test_only_an_administrator_labels_or_leaves_items(client, team):
    item = unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    team.memory.memberships.create(user=team.sales_reader, permission=3)  # curate
    client.force_login(team.sales_reader)

    answer = client.post(reverse("knowledge:review-leave", args=[item.pk]) + "?memory=team")

    assert answer.status_code == 403
    item.refresh_from_db()
    assert item.state == ReviewItem.State.OPEN


def test_reading_as_a_role_an_item_it_cannot_read_is_not_found(client, team):
    hr_item = unplaced(team, "Marta's contract ends in June.", [team.hr])
    client.force_login(team.admin)
    sales_role = team.memory.roles.get(name="Sales")
    client.post(reverse("knowledge:read-as") + "?memory=team", {"role": sales_role.pk})

    answer = client.post(reverse("knowledge:review-leave", args=[hr_item.pk]) + "?memory=team")

    assert answer.status_code == 404
    hr_item.refresh_from_db()
    assert hr_item.state == ReviewItem.State.OPEN
    assert "0 items waiting" in client.get(REVIEW).content.decode()


def test_a_conflict_settled_by_other_means_leaves_the_queue(team):
    conflict = sales_and_hr_disagree(team)

    actions.forget(fact=conflict.new, by=team.admin)

    assert not review_items.waiting(team.memory, team.admin).exists()


def test_the_review_page_reads_the_same_number_of_queries_however_many_items(
    client, team, django_assert_num_queries
):
    client.force_login(team.admin)
    sales_and_hr_disagree(team)
    unplaced(team, "Call Rossi back about the invoice.", [team.sales])
    doubt(team, "Bonus rules for next year.")
    client.get(REVIEW)  # the session and the scope warmed like any later visit

    with django_assert_num_queries(QUERIES_FOR_REVIEW):
        assert client.get(REVIEW).status_code == 200

    for n in range(3):
        unplaced(team, f"Call customer {n} back.", [team.sales])
        doubt(team, f"Unsure passage {n}.")
    with django_assert_num_queries(QUERIES_FOR_REVIEW):
        html = client.get(REVIEW).content.decode()
    assert "9 items waiting" in html


def test_the_admin_will_not_mark_a_conflict_settled_without_a_choice(client, team, admin_user):
    conflict = sales_and_hr_disagree(team)
    item = ReviewItem.objects.get(conflict=conflict)
    client.force_login(admin_user)

    answer = client.post(
        reverse("admin:knowledge_reviewitem_changelist"),
        {"action": "settle", "_selected_action": [item.pk]},
        follow=True,
    )

    assert "A conflict is settled by choosing what holds" in answer.content.decode()
    item.refresh_from_db()
    assert item.state == ReviewItem.State.OPEN
    assert [i.pk for i in review_items.waiting(team.memory, team.admin)] == [item.pk]
