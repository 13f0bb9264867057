"""Two sources that disagree: a conflict carrying the passages of both sides, instead of the
gate's silent newest-wins — read only by who reads both sides, on the page, in Review and the
API, and settled by keeping one, keeping both (with their dates), or merging them."""

from __future__ import annotations

import datetime
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from knowledge import passages, review_items, visibility
from knowledge.models import Conflict, Fact, Memory, Passage, ReviewItem, Source
from knowledge.read_layer import SYSTEM
from knowledge.tests import examples
from memory import actions
from memory.models import Origin
from memory.taught import Statement
from surfaces import portable

SALARY_HR = "Luca Bianchi earns €45,000 a year."
SALARY_SALES = "Luca Bianchi earns €50,000 a year."


@pytest.fixture
def team(db):
    return examples.team()


def note(memory: Memory, title: str, text: str, labels) -> tuple[Source, Passage]:
    """A note added to ``memory`` under ``labels``: one source, one passage."""
    source = Source.objects.create(memory=memory, kind=Source.Kind.NOTE, title=title, text=text)
    source.labels.add(*labels)
    (passage,) = passages.add(source, [text], labels=labels)
    return source, passage


def from_note(memory: Memory, source: Source, passage: Passage, page=None) -> actions.Learned:
    """What compiling a note does: the statement through the gate, citing its passage."""
    return actions.learn(
        Statement.typed(
            memory=memory,
            text=passage.text,
            origin=Origin.IMPORT,
            source=source,
            cites=[passage],
            subjects=[page] if page is not None else [],
        )
    )


def sales_and_hr_disagree(team) -> Conflict:
    """An HR letter and a Sales call note disagree about Luca's pay."""
    hr_letter, hr_passage = note(team.memory, "HR letter", SALARY_HR, [team.hr])
    call, call_passage = note(team.memory, "Sales call notes", SALARY_SALES, [team.sales])
    from_note(team.memory, hr_letter, hr_passage, team.luca)
    said = from_note(team.memory, call, call_passage, team.luca)
    assert said.conflict is not None, said.reason
    return said.conflict


# Opening one -----------------------------------------------------------------------------------


def test_two_notes_disagreeing_become_a_conflict_with_both_kept(home):
    (household,) = visibility.default_labels(home)
    monday, m = note(home, "Monday note", "The boiler is serviced every May.", [household])
    friday, f = note(home, "Friday note", "The boiler is serviced every October.", [household])
    first = from_note(home, monday, m)

    second = from_note(home, friday, f)

    assert second.verdict in ("contradiction", "refinement")
    assert second.superseded is None
    conflict = Conflict.objects.get()
    assert (conflict.old, conflict.new) == (first.fact, second.fact)
    assert "different sources" in conflict.reason
    assert Fact.objects.live().filter(pk__in=[first.fact.pk, second.fact.pk]).count() == 2
    item = ReviewItem.objects.get(kind=ReviewItem.Kind.CONFLICT)
    assert item.conflict == conflict and item.state == ReviewItem.State.OPEN


def test_the_page_shows_a_conflict_with_the_passages_of_both_sides(client, home, admin_user):
    (household,) = visibility.default_labels(home)
    boiler = home.subjects.create(kind="device", name="Boiler")
    monday, m = note(home, "Monday note", "The boiler is serviced every May.", [household])
    friday, f = note(home, "Friday note", "The boiler is serviced every October.", [household])
    from_note(home, monday, m, boiler)
    from_note(home, friday, f, boiler)
    client.force_login(admin_user)

    html = client.get(reverse("knowledge:page", args=[boiler.pk])).content.decode()

    conflicts = html[html.index('id="page-conflicts"') :]
    assert "The boiler is serviced every May." in conflicts
    assert "The boiler is serviced every October." in conflicts
    for source, passage in ((monday, m), (friday, f)):
        marker = f'href="/sources/{source.pk}/#passage-{passage.ordinal}"'
        assert marker in conflicts, source.title
        assert f"{source.title} ¶1" in conflicts
    assert reverse("memory:resolve-conflict", args=[Conflict.objects.get().pk]) in conflicts


def test_a_person_correcting_a_note_still_replaces_it_at_once(home, alice):
    (household,) = visibility.default_labels(home)
    monday, m = note(home, "Monday note", "The boiler is serviced every May.", [household])
    noted = from_note(home, monday, m).fact

    typed = actions.learn(
        Statement.typed(
            memory=home, text="The boiler is serviced every October.", origin=Origin.TYPED, by=alice
        )
    )

    assert typed.superseded == noted
    assert not Conflict.objects.exists()
    noted.refresh_from_db()
    assert noted.superseded_by == typed.fact


def test_a_source_correcting_itself_in_a_new_version_replaces_what_it_said(home):
    (household,) = visibility.default_labels(home)
    first, p1 = note(home, "Boiler", "The boiler is serviced every May.", [household])
    said = from_note(home, first, p1).fact
    second, p2 = note(home, "Boiler", "The boiler is serviced every October.", [household])
    Source.objects.filter(pk=second.pk).update(previous=first)
    second.refresh_from_db()

    again = from_note(home, second, p2)

    assert again.superseded == said
    assert not Conflict.objects.exists()


def test_someone_taking_back_what_they_said_in_one_conversation_replaces_it(home, alice):
    chat = Source.objects.create(memory=home, kind=Source.Kind.CONVERSATION, title="Chat")
    said = actions.learn(
        Statement.said(
            memory=home,
            text="The spare key is under the blue pot.",
            origin=Origin.CHAT,
            source=chat,
        )
    ).fact

    again = actions.learn(
        Statement.said(
            memory=home,
            text="The spare key is not under the blue pot.",
            origin=Origin.CHAT,
            source=chat,
        )
    )

    assert again.superseded == said
    assert not Conflict.objects.exists()


# Who reads it: both sides, on every surface ----------------------------------------------------


def test_a_sales_and_hr_conflict_is_read_by_the_administrator_only(team):
    conflict = sales_and_hr_disagree(team)

    conflicts = Conflict.objects.for_memory(team.memory)
    assert list(conflicts.readable_by(team.admin)) == [conflict]
    assert not conflicts.readable_by(team.sales_reader).exists()
    assert not conflicts.readable_by(team.hr_reader).exists()
    assert [i.conflict for i in review_items.waiting(team.memory, team.admin)] == [conflict]
    assert not review_items.waiting(team.memory, team.sales_reader).exists()
    assert not review_items.waiting(team.memory, team.hr_reader).exists()


def test_the_sales_reader_sees_the_conflict_nowhere_and_the_admin_everywhere(client, team):
    conflict = sales_and_hr_disagree(team)
    page = reverse("knowledge:page", args=[team.luca.pk])
    marker = f'id="conflict-{conflict.pk}"'

    client.force_login(team.sales_reader)
    assert marker not in client.get(page).content.decode()
    assert marker not in client.get(reverse("knowledge:review") + "?memory=team").content.decode()
    assert client.get("/api/memory/review?memory=team").json() == []
    assert client.get("/api/memory/conflicts?memory=team").json() == []
    assert SALARY_HR not in client.get("/api/memory/review?memory=team").content.decode()

    client.force_login(team.admin)
    assert marker in client.get(page).content.decode()
    queue = client.get(reverse("knowledge:review") + "?memory=team").content.decode()
    assert marker in queue and SALARY_HR in queue and SALARY_SALES in queue
    (item,) = client.get("/api/memory/review?memory=team").json()
    assert item["kind"] == "conflict"
    sides = item["conflict"]
    assert [p["text"] for p in sides["old"]["passages"]] == [SALARY_HR]
    assert [p["text"] for p in sides["new"]["passages"]] == [SALARY_SALES]
    assert [c["id"] for c in client.get("/api/memory/conflicts?memory=team").json()] == [
        conflict.pk
    ]


def test_reading_as_the_sales_role_hides_the_conflict_from_the_administrator(client, team):
    conflict = sales_and_hr_disagree(team)
    client.force_login(team.admin)
    sales_role = team.memory.roles.get(name="Sales")
    client.post(reverse("knowledge:read-as") + "?memory=team", {"role": sales_role.pk})

    queue = client.get(reverse("knowledge:review") + "?memory=team").content.decode()

    assert f'id="conflict-{conflict.pk}"' not in queue
    assert "0 items waiting" in queue


def test_a_sales_curator_cannot_settle_a_conflict_they_cannot_read(client, team):
    conflict = sales_and_hr_disagree(team)
    team.memory.memberships.create(user=team.sales_reader, permission=3)  # curate
    client.force_login(team.sales_reader)

    answer = client.post(
        reverse("memory:resolve-conflict", args=[conflict.pk]) + "?memory=team", {"keep": "new"}
    )

    assert answer.status_code == 404
    conflict.refresh_from_db()
    assert conflict.state == Conflict.State.OPEN


# Settling ------------------------------------------------------------------------------------


def test_keeping_the_new_one_replaces_the_old_and_settles_its_review_item(team):
    conflict = sales_and_hr_disagree(team)

    settled = actions.settle_conflict(conflict=conflict, keep="new", by=team.admin)

    old = Fact.objects.get(pk=conflict.old_id)
    assert old.superseded_by_id == conflict.new_id and not old.is_live
    assert Fact.objects.get(pk=conflict.new_id).is_live
    assert ReviewItem.objects.get(conflict=conflict).state == ReviewItem.State.SETTLED
    assert not review_items.waiting(team.memory, team.admin).exists()
    assert settled.message.startswith(f"Kept “{SALARY_SALES}”")


def test_keeping_the_old_one_forgets_the_new(team):
    conflict = sales_and_hr_disagree(team)

    actions.settle_conflict(conflict=conflict, keep="old", by=team.admin)

    assert Fact.objects.get(pk=conflict.old_id).is_live
    assert Fact.objects.get(pk=conflict.new_id).status == Fact.Status.FORGOTTEN


def test_keeping_both_with_dates_reads_until_and_since_that_day(client, team):
    conflict = sales_and_hr_disagree(team)
    Fact.objects.filter(pk=conflict.old_id).update(
        valid_from=timezone.now() - datetime.timedelta(days=90)
    )
    march = timezone.localdate() - datetime.timedelta(days=30)

    settled = actions.settle_conflict(conflict=conflict, keep="dated", since=march, by=team.admin)

    old, new = Fact.objects.get(pk=conflict.old_id), Fact.objects.get(pk=conflict.new_id)
    day = timezone.make_aware(datetime.datetime.combine(march, datetime.time.min))
    assert (old.valid_to, old.superseded_by_id, old.status) == (day, None, "queued")
    assert (new.valid_from, new.is_live) == (day, True)
    assert list(Fact.objects.filter(pk__in=[old.pk, new.pk]).as_of(timezone.now())) == [new]
    when = f"{march:%-d %b %Y}"
    assert settled.message == (
        f"Kept both with their dates: “{SALARY_HR}” until {when}, “{SALARY_SALES}” since {when}."
    )
    client.force_login(team.admin)
    html = client.get(reverse("knowledge:page", args=[team.luca.pk])).content.decode()
    assert f"until {when}" in html[html.index('id="page-until"') :]
    assert f"since {when}" in html


def test_a_date_before_the_older_was_said_or_after_today_is_refused(team):
    conflict = sales_and_hr_disagree(team)
    for day, said in (
        (timezone.localdate() + datetime.timedelta(days=3), "is after today"),
        (timezone.localdate() - datetime.timedelta(days=3), "was only said on"),
    ):
        with pytest.raises(Exception, match=said):
            actions.settle_conflict(conflict=conflict, keep="dated", since=day, by=team.admin)
        conflict.refresh_from_db()
        assert conflict.state == Conflict.State.OPEN


def test_merging_writes_one_statement_citing_both_sides_that_replaces_both(team):
    conflict = sales_and_hr_disagree(team)
    words = "Luca Bianchi earns €45,000 a year; Sales was told €50,000."

    settled = actions.settle_conflict(conflict=conflict, keep="merged", text=words, by=team.admin)

    merged = settled.conflict.merged_into
    assert merged.text == words and merged.is_live
    cited = set(merged.passages.values_list("text", flat=True))
    assert cited == {SALARY_HR, SALARY_SALES}
    assert list(merged.subjects.all()) == [team.luca]
    for side in (conflict.old_id, conflict.new_id):
        assert Fact.objects.get(pk=side).superseded_by == merged
    facts = Fact.objects.filter(pk=merged.pk)
    assert facts.readable_by(team.admin).exists()
    assert not facts.readable_by(team.sales_reader).exists()  # it cites HR as well
    assert not facts.readable_by(team.hr_reader).exists()
    assert settled.message.startswith(f"Merged into “{words}” (fact #{merged.pk})")


def test_a_merge_without_words_is_refused_and_changes_nothing(team):
    conflict = sales_and_hr_disagree(team)
    with pytest.raises(Exception, match="can't be empty"):
        actions.settle_conflict(conflict=conflict, keep="merged", text="  ", by=team.admin)
    conflict.refresh_from_db()
    assert conflict.state == Conflict.State.OPEN


def test_settling_twice_is_refused_saying_how_it_was_settled(client, team):
    conflict = sales_and_hr_disagree(team)
    actions.settle_conflict(conflict=conflict, keep="both", by=team.admin)
    client.force_login(team.admin)

    again = client.post(
        f"/api/memory/conflicts/{conflict.pk}/settle?memory=team",
        {"keep": "merged", "text": "Both."},
        content_type="application/json",
    )

    assert again.status_code == 409
    assert "already settled by paolo: kept both" in again.json()["detail"]


def test_the_api_settles_with_dates_and_by_merging(client, team):
    first = sales_and_hr_disagree(team)
    client.force_login(team.admin)

    merged = client.post(
        f"/api/memory/conflicts/{first.pk}/settle?memory=team",
        {"keep": "merged", "text": "Luca Bianchi earns €45,000."},
        content_type="application/json",
    )

    assert merged.status_code == 200, merged.content
    assert merged.json()["resolution"] == "merged"
    assert merged.json()["merged_into"] == Fact.objects.get(text="Luca Bianchi earns €45,000.").pk
    bad = client.post(
        f"/api/memory/conflicts/{first.pk}/settle?memory=team",
        {"keep": "sideways"},
        content_type="application/json",
    )
    assert bad.status_code == 400


def test_the_review_form_settles_a_conflict_and_answers_with_its_partial(client, team):
    conflict = sales_and_hr_disagree(team)
    client.force_login(team.admin)
    url = reverse("memory:resolve-conflict", args=[conflict.pk]) + "?memory=team"

    answer = client.post(url, {"keep": "old"}, headers={"HX-Request": "true"})

    html = answer.content.decode()
    assert html.lstrip().startswith(f'<div id="conflict-{conflict.pk}"')
    assert f"Kept “{SALARY_HR}”" in html
    assert "conflictSettled" in answer.headers["HX-Trigger"]


def test_without_javascript_the_review_form_goes_back_where_it_was(client, team):
    conflict = sales_and_hr_disagree(team)
    client.force_login(team.admin)
    page = reverse("knowledge:page", args=[team.luca.pk])

    answer = client.post(
        reverse("memory:resolve-conflict", args=[conflict.pk]) + "?memory=team",
        {"keep": "both", "next": page},
    )

    assert answer.status_code == 302 and answer.url == page
    followed = client.get(page).content.decode()
    assert "Kept both" in followed
    assert f'id="conflict-{conflict.pk}"' not in followed  # settled: no longer on the page


def test_the_terminal_settles_by_merging_and_lists_only_what_the_person_reads(team):
    conflict = sales_and_hr_disagree(team)
    out = io.StringIO()

    call_command("memory", "--memory", "team", "--as", "giulia", "conflicts", stdout=out)
    assert out.getvalue().strip() == "Nothing to settle."
    with pytest.raises(CommandError, match="can't be empty"):
        call_command("memory", "--memory", "team", "settle", str(conflict.pk), "merged")

    call_command(
        "memory",
        "--memory",
        "team",
        "settle",
        str(conflict.pk),
        "merged",
        "--text",
        "Luca Bianchi earns €45,000.",
        stdout=out,
    )

    assert "Merged into “Luca Bianchi earns €45,000.”" in out.getvalue()


def test_an_open_conflict_imported_into_another_memory_waits_in_its_review(team):
    sales_and_hr_disagree(team)
    data = json.loads(portable.export_json(team.memory, reader=SYSTEM))
    other = Memory.objects.create(slug="copy", name="Copy")

    portable.import_memory(other, data)

    (item,) = review_items.waiting(other, SYSTEM)
    assert (item.conflict.old.text, item.conflict.new.text) == (SALARY_HR, SALARY_SALES)
