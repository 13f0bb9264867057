"""Curating in the admin: every model has a page, every write goes through the actions the
other surfaces use, fields only actions change are read-only, and a staff member who is not a
superuser sees and changes only what their permission in each memory allows."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agent import actions as agent_actions
from brain import workers
from brain.models import ModelCall, WaitingCall, WorkerHeartbeat
from knowledge import actions as knowledge_actions
from knowledge import sources
from knowledge.embedding import get_embedder
from knowledge.models import (
    Conflict,
    Fact,
    Label,
    LabellingRule,
    Membership,
    Memory,
    PageType,
    Permission,
    ReviewItem,
    Subject,
)
from memory import actions, consolidator, conversations, reflection
from memory.models import Brief, Change, DocumentRevision, InboxItem, Origin, StudySession
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import DeepReview, Finding, Guess, HouseEvent, InsightRun, Judgement, Rule

LAMP = "light.office_lamp"


def _file(memory: Memory, *texts: str, by=None) -> list[Fact]:
    facts = [
        actions.learn(Statement.typed(memory=memory, text=text, origin=Origin.TYPED, by=by)).fact
        for text in texts
    ]
    consolidator.execute(
        consolidator.request_consolidation(memory=memory, trigger="cli", send=False).run.pk
    )
    for fact in facts:
        fact.refresh_from_db()
    return facts


def _url(obj_or_model, view: str = "change") -> str:
    meta = obj_or_model._meta
    name = f"admin:{meta.app_label}_{meta.model_name}_{view}"
    return reverse(name, args=[obj_or_model.pk] if view == "change" else [])


def _act(client, model, action: str, rows, **extra):
    """Run a list action on ``rows`` as a person would from the list's action bar."""
    data = {"action": action, "_selected_action": [row.pk for row in rows], "index": 0, **extra}
    return client.post(_url(model, "changelist"), data, follow=True)


def _save(client, obj, **fields):
    """Send ``obj``'s change form as the page would: its inlines' management data included."""
    page = client.get(_url(obj))
    data = {}
    for inline in page.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        data |= {
            management.add_prefix(name): management[name].value() for name in management.fields
        }
    return client.post(_url(obj), data | fields, follow=True)


def _said(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def content(home, admin_user, alice) -> SimpleNamespace:
    """A row of every model the admin shows, made the way the product makes them."""
    office = Subject.objects.create(memory=home, kind="room", name="Office")
    lamp = Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id=LAMP,
        room=office,
        aliases=["the beacon"],
    )
    timer, hall = _file(home, "The office lamp turns off at 23:00.", "The hall is cold.")
    waiting = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    conflict = knowledge_actions.open_conflict(old=hall, new=waiting, reason="unsure")
    agent_actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")
    agent_actions.record_procedure(memory=home, task="Deploy", steps=["push"], outcome="ok")
    Brief.objects.create(memory=home, text="Nothing new.", composer="offline")
    said = [{"speaker": "Ada", "text": "I like the hall dim at night"}]
    reflection.reflect(
        conversations.record_conversation(memory=home, channel="voice", messages=said).source
    )
    finding = review_findings.raise_finding(
        memory=home,
        check_id="left_on",
        text="The lamp was left on",
        severity="low",
        entity_id=LAMP,
    ).finding
    rule = review_findings.not_a_problem(finding=finding, by=admin_user)
    guess = review_guesses.propose_guess(
        memory=home, text="The office lamp is a night light", subject=lamp
    ).guess
    Judgement.objects.create(
        memory=home, check_id="left_on", subject=lamp, raised=3, marked_not_a_problem=3
    )
    DeepReview.objects.create(
        memory=home, report="All quiet.", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    ModelCall.objects.create(
        task="consolidate", provider="stub", model="m", input_bytes=1, state="ok", timeout_s=1
    )
    WorkerHeartbeat.objects.create(hostname="worker@here", seen_at=timezone.now())
    workers.seen(workers.create_token(memory=home, name="attic pc").token, "attic-pc")
    workers.set_route(memory=home, task="reflect", provider="worker", model="llama3.2")
    WaitingCall.objects.create(memory=home, task="reflect", deadline=timezone.now())
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    PageType.objects.get_or_create(memory=home, key="person", defaults={"name": "Person"})
    ReviewItem.objects.create(memory=home, kind="labelling", question="Which label?")
    sources.add_source(memory=home, by=admin_user, text="The boiler is serviced in May.")
    rule_for = LabellingRule.objects.create(memory=home, name="Boiler notes", title_words="boiler")
    rule_for.labels.add(*Label.objects.filter(memory=home))
    soon = timezone.now() + timedelta(minutes=5)
    StudySession.objects.create(memory=home, topic="the boiler", lease_expires_at=soon)
    InsightRun.objects.create(memory=home, lease_expires_at=soon)
    HouseEvent.objects.create(
        memory=home, entity_id=LAMP, state="on", cause="by_hand", at=timezone.now()
    )
    Group.objects.create(name="household")
    Token.objects.create(user=admin_user)
    return SimpleNamespace(
        lamp=lamp,
        timer=timer,
        hall=hall,
        waiting=waiting,
        conflict=conflict,
        rule=rule,
        guess=guess,
    )


# Every page --------------------------------------------------------------------------------


def test_every_admin_list_and_change_page_opens_for_a_superuser(client, admin_user, content):
    client.force_login(admin_user)
    empty = []

    for model, model_admin in admin.site._registry.items():
        listed = client.get(_url(model, "changelist"))
        assert listed.status_code == 200, model
        row = model_admin.get_queryset(listed.wsgi_request).first()
        if row is None:
            empty.append(model._meta.label)
            continue
        assert client.get(_url(row)).status_code == 200, model

    assert empty == []


# Read-only fields and writes through actions ---------------------------------------------------


def test_only_a_facts_words_are_editable_and_the_rest_stays_as_actions_left_it(
    client, admin_user, content
):
    client.force_login(admin_user)
    fact = content.timer

    page = client.get(_url(fact)).content.decode()
    _save(client, fact, text=fact.text, status="forgotten", confidence="0.1")

    assert 'name="text"' in page
    assert 'name="status"' not in page and 'name="confidence"' not in page
    fact.refresh_from_db()
    assert (fact.status, fact.confidence) == ("filed", 0.6)


def test_pages_of_rows_that_change_only_through_actions_have_no_inputs_and_no_save(
    client, admin_user, content
):
    client.force_login(admin_user)
    for row in [content.conflict, content.rule, content.guess, Change.objects.first()]:
        page = client.get(_url(row)).content.decode()
        assert 'name="_save"' not in page, row
        assert "<textarea" not in page and 'type="text"' not in page, row


def test_saving_new_words_edits_the_fact_through_the_gate_and_the_log(client, admin_user, content):
    client.force_login(admin_user)
    old = content.timer

    response = _save(client, old, text="The office lamp turns off at 23:30.")

    new = Fact.objects.get(text="The office lamp turns off at 23:30.")
    assert response.redirect_chain[-1][0] == _url(new)
    change = Change.objects.for_memory(old.memory).newest_first().first()
    assert _said(response) == [
        f"Fact #{old.pk} now reads “{new.text}” (fact #{new.pk}). "
        f"Change #{change.number} in the log undoes it."
    ]
    assert "23:30" in DocumentRevision.objects.current(old.memory).text
    assert list(new.subjects.all()) == [content.lamp]


def test_words_that_are_a_secret_are_refused_with_the_text_kept(client, admin_user, content):
    client.force_login(admin_user)

    response = _save(client, content.timer, text="The alarm code is 4711")

    assert response.status_code == 200
    page = response.content.decode()
    assert "brain does not keep secrets" in page and "The alarm code is 4711" in page
    assert Fact.objects.live().filter(pk=content.timer.pk).exists()


def test_a_forgotten_facts_words_are_read_only(client, admin_user, content):
    client.force_login(admin_user)
    actions.forget(fact=content.timer, by=admin_user)

    assert 'name="text"' not in client.get(_url(content.timer)).content.decode()


def test_a_subjects_presence_changes_only_through_its_actions(client, admin_user, content):
    client.force_login(admin_user)
    lamp = content.lamp

    _save(
        client,
        lamp,
        kind="device",
        name="Desk lamp",
        aliases="The Beacon, bob",
        entity_id=LAMP,
        room=lamp.room_id,
        present="",
    )
    lamp.refresh_from_db()
    assert (lamp.name, lamp.aliases, lamp.present) == ("Desk lamp", ["the beacon", "bob"], True)

    _act(client, Subject, "gone", [lamp])
    lamp.refresh_from_db()
    content.timer.refresh_from_db()
    assert not lamp.present and content.timer.subject_removed


def test_facts_are_found_by_a_devices_nickname_or_entity_id(client, admin_user, content):
    client.force_login(admin_user)

    for words in ["the beacon", "office_lamp", "23:00"]:
        page = client.get(_url(Fact, "changelist"), {"q": words}).content.decode()
        assert "The office lamp turns off at 23:00." in page, words
        assert "The hall is cold." not in page, words


def test_forget_and_restore_go_through_the_actions(client, admin_user, content):
    client.force_login(admin_user)
    fact = content.timer

    forgotten = _act(client, Fact, "forget", [fact])
    fact.refresh_from_db()
    assert fact.status == "forgotten"
    assert InboxItem.objects.filter(action="forget", text=fact.text, state="pending").exists()
    assert _said(forgotten) == [
        f"#{fact.pk} “{fact.text}”: Forgotten; its line leaves the memory document at the next "
        "filing."
    ]

    restored = _act(client, Fact, "restore", [fact])
    fact.refresh_from_db()
    assert fact.status == "filed"
    assert _said(restored) == [f"Kept #{fact.pk} “{fact.text}”."]
    assert not InboxItem.objects.filter(action="forget", state="pending").exists()


def test_expiry_runs_again_on_the_chosen_facts(client, admin_user, content):
    client.force_login(admin_user)
    past = timezone.now() - timedelta(days=1)
    Fact.objects.filter(pk__in=[content.timer.pk, content.hall.pk]).update(expires_at=past)

    response = _act(client, Fact, "expire", [content.timer])

    statuses = dict(Fact.objects.values_list("pk", "status"))
    assert (statuses[content.timer.pk], statuses[content.hall.pk]) == ("expired", "filed")
    assert _said(response) == ["1 of 1 past their date expired; the rest are in date."]


def test_re_embedding_gives_the_chosen_facts_the_current_embedders_vectors(
    client, admin_user, content
):
    client.force_login(admin_user)
    Fact.objects.filter(pk=content.hall.pk).update(embedding=None, embedder="")

    response = _act(client, Fact, "reembed", [content.hall])

    hall = Fact.objects.get(pk=content.hall.pk)
    assert hall.embedder == get_embedder().name and hall.embedding is not None
    assert _said(response) == [f"Re-embedded 1 with the {get_embedder().name} embedder."]


def test_a_change_is_undone_from_the_log(client, admin_user, content):
    client.force_login(admin_user)
    added = Change.objects.get(summary__contains="23:00")

    response = _act(client, Change, "undo", [added])

    assert "23:00" not in DocumentRevision.objects.current(content.timer.memory).text
    assert _said(response) == [f"Undone: change #{added.number}: {added.summary}"]


def test_a_conflict_is_settled_and_a_waiting_item_dropped_through_the_actions(
    client, admin_user, content
):
    client.force_login(admin_user)

    _act(client, Conflict, "keep_old", [content.conflict])

    content.conflict.refresh_from_db()
    assert content.conflict.resolution == "old"
    assert Fact.objects.get(pk=content.waiting.pk).status == "forgotten"
    assert InboxItem.objects.get(fact=content.waiting).state == "dropped"


def test_a_rule_is_lifted_and_a_guess_confirmed_through_the_actions(client, admin_user, content):
    client.force_login(admin_user)

    _act(client, Rule, "lift", [content.rule])
    confirmed = _act(client, Guess, "confirm", [content.guess])

    assert Rule.objects.get(pk=content.rule.pk).removed_at is not None
    guess = Guess.objects.get(pk=content.guess.pk)
    assert guess.state == "confirmed" and guess.fact.is_live
    assert guess.answered_by == admin_user
    assert _said(confirmed) == [f"“{guess.text}”: Filed as known."]


def test_an_answered_guess_is_not_answered_twice(client, admin_user, content):
    client.force_login(admin_user)
    _act(client, Guess, "confirm", [content.guess])

    again = _act(client, Guess, "reject", [content.guess])

    assert Guess.objects.get(pk=content.guess.pk).state == "confirmed"
    assert _said(again) == ["That guess was already confirmed by ada."]


def test_a_subject_gone_from_the_house_is_back_with_its_facts(client, admin_user, content):
    client.force_login(admin_user)
    _act(client, Subject, "gone", [content.lamp])

    back = _act(client, Subject, "back", [content.lamp])

    content.lamp.refresh_from_db()
    content.timer.refresh_from_db()
    assert content.lamp.present and not content.timer.subject_removed
    assert _said(back) == ["“Office lamp” is back, and so are its facts."]


def test_findings_are_marked_fixed_or_not_a_problem_through_the_actions(
    client, admin_user, content
):
    client.force_login(admin_user)
    raised = [
        review_findings.raise_finding(
            memory=content.lamp.memory, check_id=check, text=text, severity="low", entity_id=LAMP
        ).finding
        for check, text in (("battery_low", "The lamp's battery is low"), ("offline", "Offline"))
    ]

    fixed = _act(client, Finding, "fixed", [raised[0]])
    quiet = _act(client, Finding, "not_a_problem", [raised[1]])

    states = dict(Finding.objects.values_list("pk", "state"))
    assert (states[raised[0].pk], states[raised[1].pk]) == ("suppressed", "not_a_problem")
    assert _said(fixed) == ["“The lamp's battery is low”: quiet while it stays fixed."]
    rule = Rule.objects.get(finding=raised[1])
    assert _said(quiet) == [f"“Offline”: {rule.describe()}."]


def test_a_guess_is_put_away_for_now_through_the_action(client, admin_user, content):
    client.force_login(admin_user)

    dismissed = _act(client, Guess, "dismiss", [content.guess])

    assert Guess.objects.get(pk=content.guess.pk).state == "sleeping"
    assert _said(dismissed) == [
        "“The office lamp is a night light”: put away for now; it comes back later."
    ]


def test_a_waiting_item_is_dropped_once_and_then_said_to_be_gone(client, admin_user, content):
    client.force_login(admin_user)
    item = InboxItem.objects.get(fact=content.waiting, state="pending")

    dropped = _act(client, InboxItem, "drop", [item])
    again = _act(client, InboxItem, "drop", [item])

    assert InboxItem.objects.get(pk=item.pk).state == "dropped"
    assert _said(dropped) == ["Dropped “The loft is warm.”."]
    assert _said(again) == ["“The loft is warm.” was no longer waiting; nothing changed."]


@pytest.mark.parametrize(
    ("action", "resolution", "said", "hall_believed"),
    [
        (
            "keep_new",
            "new",
            "Kept “The loft is warm.”; “The hall is cold.” is no longer believed (it stays in the "
            "history).",
            False,
        ),
        ("keep_both", "both", "Kept both: “The hall is cold.” and “The loft is warm.”.", True),
    ],
)
def test_a_conflict_is_settled_either_way_through_the_action(
    client, admin_user, content, action, resolution, said, hall_believed
):
    client.force_login(admin_user)

    settled = _act(client, Conflict, action, [content.conflict])

    content.conflict.refresh_from_db()
    assert content.conflict.resolution == resolution
    assert Fact.objects.get(pk=content.waiting.pk).is_live
    assert Fact.objects.get(pk=content.hall.pk).is_live is hall_believed
    assert _said(settled) == [said]


def test_two_subjects_are_merged_into_the_one_the_person_keeps(client, admin_user, content):
    client.force_login(admin_user)
    twin = Subject.objects.create(memory=content.lamp.memory, kind="device", name="Desk light")
    fact = actions.learn(
        Statement.typed(
            memory=content.lamp.memory, text="It hums.", origin=Origin.TYPED, subjects=[twin.pk]
        )
    ).fact

    asked = _act(client, Subject, "merge", [content.lamp, twin])
    merged = _act(client, Subject, "merge", [content.lamp, twin], keep=content.lamp.pk)

    assert "Which one stays?" in asked.content.decode()
    assert not Subject.objects.filter(pk=twin.pk).exists()
    assert list(fact.subjects.all()) == [content.lamp]
    assert _said(merged) == [
        "Merged “Desk light” into “Office lamp”: 1 fact followed; it is also called "
        "“desk light” now."
    ]


# Who may see and change what ---------------------------------------------------------------------


@pytest.fixture
def sam(django_user_model, home, settings):
    """Staff, not a superuser: read in home, curate in the cabin, nothing in the office."""
    settings.BRAIN_DEFAULT_PERMISSION = "none"
    cabin = Memory.objects.create(slug="cabin", name="Cabin")
    Memory.objects.create(slug="office", name="Office")
    person = django_user_model.objects.create_user(username="sam", password="x", is_staff=True)
    Membership.objects.create(memory=home, user=person, permission=Permission.READ)
    Membership.objects.create(memory=cabin, user=person, permission=Permission.CURATE)
    return person


@pytest.fixture
def three(sam) -> SimpleNamespace:
    home, cabin, office = (Memory.objects.get(slug=s) for s in ("home", "cabin", "office"))
    return SimpleNamespace(
        home=_file(home, "The hall is cold.")[0],
        cabin=_file(cabin, "The cabin stove smokes.")[0],
        office=_file(office, "The office printer jams.")[0],
    )


def test_a_staff_member_sees_only_the_memories_they_may_read(client, sam, three):
    client.force_login(sam)

    page = client.get(_url(Fact, "changelist")).content.decode()

    assert "The hall is cold." in page and "The cabin stove smokes." in page
    assert "The office printer jams." not in page
    assert client.get(_url(three.office)).status_code == 302  # no such fact, for them
    for path in [_url(Change, "changelist"), _url(DocumentRevision, "changelist")]:
        assert "printer" not in client.get(path).content.decode()
    memories = client.get(_url(Memory, "changelist")).content.decode()
    assert "Cabin" in memories and ">Office<" not in memories
    index = client.get(reverse("admin:index")).content.decode()
    assert "Facts" in index and "Model calls" not in index


def test_a_staff_member_changes_only_where_they_may_curate(client, sam, three):
    client.force_login(sam)

    read_only = client.get(_url(three.home)).content.decode()
    refused = client.post(_url(three.home), {"text": "The hall is freezing."})
    edited = _save(client, three.cabin, text="The cabin stove smokes in wind.")

    assert 'name="text"' not in read_only
    assert refused.status_code == 403
    assert Fact.objects.live().filter(text="The hall is cold.").exists()
    assert edited.redirect_chain
    assert Fact.objects.live().filter(text="The cabin stove smokes in wind.").exists()


def test_an_action_on_a_memory_the_person_may_only_read_changes_nothing(client, sam, three):
    client.force_login(sam)

    mixed = _act(client, Fact, "forget", [three.home, three.cabin])
    alone = _act(client, Fact, "forget", [three.cabin])

    assert _said(mixed) == [
        "This needs permission to curate (edit, undo, forget, settle, export) in “Home”; you "
        "may read there. An administrator can grant more. Nothing was changed."
    ]
    assert Fact.objects.get(pk=three.home.pk).status == "filed"
    assert "Forgotten" in _said(alone)[0]
    assert Fact.objects.get(pk=three.cabin.pk).status == "forgotten"


def test_a_memorys_settings_and_grants_need_administer(client, sam, three):
    client.force_login(sam)
    cabin = three.cabin.memory

    settings_page = client.get(_url(cabin)).content.decode()
    changed = client.post(_url(cabin), {"name": "Mine", "slug": "cabin", "memory_max_kb": 32})

    assert 'name="name"' not in settings_page
    assert changed.status_code == 403
    assert Memory.objects.get(pk=cabin.pk).name == "Cabin"
    assert client.get(_url(Membership, "add")).status_code == 403


def test_a_staff_member_does_not_see_the_platforms_rows(client, sam):
    client.force_login(sam)

    assert client.get(_url(ModelCall, "changelist")).status_code == 403


# Cost of a list ----------------------------------------------------------------------------


def test_the_fact_list_costs_the_same_queries_for_3_facts_or_30(
    client, admin_user, home, django_assert_num_queries
):
    lamp = Subject.objects.create(memory=home, kind="device", name="Office lamp", entity_id=LAMP)
    client.force_login(admin_user)
    for count in (3, 30):
        for n in range(count - Fact.objects.count()):
            actions.learn(
                Statement.typed(
                    memory=home,
                    text=f"Shelf {n} holds {n} boxes.",
                    origin=Origin.TYPED,
                    subjects=[lamp.pk],
                )
            )
        # The session and the person; the memory filter's choices; the count, the page and
        # the subjects of its rows; the date hierarchy's range and days; how many of them are in
        # use (House's facts known); and what every page's context adds (the memories, open
        # findings and guesses for the navigation).
        with django_assert_num_queries(12):
            assert client.get(_url(Fact, "changelist")).status_code == 200
