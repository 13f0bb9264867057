"""Privacy that fails closed, case by case: what was seen when brain was tried from outside
with a team memory labelled Sales and HR, a second memory, and people with different rights
(``brain/tests/privacy_world.py``). The generated sweep over every surface is
``brain/tests/test_leak_sweep.py``; these name each case."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from brain.tests import privacy_world
from brain.tests.privacy_world import HR, SALES
from knowledge import labeller, labelling_rules, passages, visibility
from knowledge.models import (
    Fact,
    Label,
    LabellingRule,
    Passage,
    Source,
    Subject,
)
from knowledge.sources import add_source
from memory import brief, compiling, measurements
from memory.actions import learn
from memory.models import Origin
from memory.taught import Statement
from review import counts, status


@pytest.fixture
def world(db):
    return privacy_world.build()


def _as(client, world, name):
    client.force_login(world.people[name])
    return client


def _hr_source(world) -> Source:
    return world.sources["hr-note"]


# Read as is bound to the memory it was chosen in ------------------------------------------------


def test_reading_as_the_superuser_in_a_memory_one_administers_opens_nothing_of_another(
    client, world
):
    _as(client, world, "otheradmin").post(
        f"{reverse('knowledge:read-as')}?memory=other", {"person": "root"}
    )
    source = client.get(
        reverse("knowledge:source", args=[_hr_source(world).pk]), {"memory": "other"}
    )
    team_page = Subject.objects.as_system("the test's page").get(
        memory=world.team, name="Marta Verdi"
    )
    page = client.get(reverse("knowledge:page", args=[team_page.pk]), {"memory": "other"})

    assert source.status_code == 404 and HR not in source.content.decode()
    assert page.status_code == 404 and team_page.name not in page.content.decode()


def test_reading_as_in_one_memory_does_not_follow_a_link_without_a_memory_into_another(
    client, world
):
    _as(client, world, "otheradmin").post(
        f"{reverse('knowledge:read-as')}?memory=other", {"person": "root"}
    )
    client.get(reverse("knowledge:sources"), {"memory": "other"})  # the page last chosen
    answer = client.get(reverse("knowledge:source", args=[_hr_source(world).pk]))
    assert HR not in answer.content.decode()


# Not found and not allowed look the same ------------------------------------------------------


@pytest.mark.parametrize("surface", ["page", "api"])
def test_a_source_one_may_not_read_answers_as_a_missing_one_does_after_the_same_work(
    client, world, surface
):
    _as(client, world, "sales").get(reverse("knowledge:sources"), {"memory": "team"})
    unreadable, missing = _hr_source(world).pk, 999_999

    def ask(pk):
        if surface == "page":
            url = reverse("knowledge:source", args=[pk])
        else:
            url = reverse("knowledge-api:source-compile", args=[pk])
        with CaptureQueriesContext(connection) as queries:
            answer = client.get(url, {"memory": "team"})
        return answer, [q["sql"].replace(str(pk), "PK") for q in queries.captured_queries]

    (hidden, hidden_work), (gone, gone_work) = ask(unreadable), ask(missing)
    assert hidden.status_code == gone.status_code == 404
    words = _shape(hidden.content.decode().replace(str(unreadable), "N"))
    assert words == _shape(gone.content.decode().replace(str(missing), "N"))
    assert [_shape(sql) for sql in hidden_work] == [_shape(sql) for sql in gone_work]


def _shape(text: str) -> str:
    """``text`` with what differs between any two requests taken out: quoted values (times, a
    session's key, a CSRF token) and numbers."""
    return re.sub(r"\d+", "0", re.sub(r"'[^']*'|\"[A-Za-z0-9]{30,}\"", "''", text))


def test_a_fact_one_may_not_read_is_named_with_the_words_of_a_missing_one(client, world):
    _as(client, world, "sales")
    hr_fact = Fact.objects.as_system("the test's fact").filter(text__contains=HR).first()
    hidden = client.get(reverse("knowledge-api:fact", args=[hr_fact.pk]), {"memory": "team"})
    gone = client.get(reverse("knowledge-api:fact", args=[999_999]), {"memory": "team"})
    assert hidden.status_code == gone.status_code == 404
    assert hidden.json()["detail"].replace(str(hr_fact.pk), "N") == gone.json()["detail"].replace(
        "999999", "N"
    )


# Explain names only what its reader may read ----------------------------------------------------


def _sales_fact_replaced_by_hr(world):
    """A Sales line, then a line an HR administrator types that changes it, citing an HR
    passage (as a correction through a note labelled HR would)."""
    sales_label, hr_label = (
        Label.objects.get(memory=world.team, name="Sales"),
        Label.objects.get(memory=world.team, name="HR"),
    )
    said = add_source(
        memory=world.team,
        by=world.superuser,
        title="Desk plan",
        labels=[sales_label],
        text="The quarterly forecast is owned by Luca Bianchi.",
    ).source
    compiling.compile_now(said, by=world.superuser)
    old = Fact.objects.as_system("the test's fact").get(source=said)
    correction = add_source(
        memory=world.team,
        by=world.superuser,
        title=f"Desk plan {HR}",
        labels=[hr_label],
        text=f"The quarterly forecast is now owned by Marta Verdi, not Luca Bianchi ({HR}).",
    ).source
    cited = list(correction.passages.as_system("the test's passage"))
    learned = learn(
        Statement.compiled(
            memory=world.team,
            text=f"The quarterly forecast is now owned by Marta Verdi, not Luca Bianchi ({HR}).",
            origin=Origin.CORRECTION,
            by=world.superuser,
            source=correction,
            cites=cited,
            reader=visibility.Reader("admin", frozenset({sales_label.pk, hr_label.pk})),
        )
    )
    return old, learned


def test_a_newer_statement_fewer_people_may_read_opens_a_conflict_instead_of_retiring(world):
    old, learned = _sales_fact_replaced_by_hr(world)
    old.refresh_from_db()
    assert learned.conflict is not None
    assert old.is_live and old.superseded_by_id is None


def test_explain_never_shows_a_reader_the_words_of_a_neighbour_they_may_not_read(client, world):
    old, learned = _sales_fact_replaced_by_hr(world)
    Fact.objects.as_system("the test forces the replacement").filter(pk=old.pk).update(
        superseded_by=learned.fact, valid_to=learned.fact.created_at
    )
    sales = _as(client, world, "sales").get(
        reverse("knowledge-api:fact", args=[old.pk]), {"memory": "team"}
    )
    assert sales.status_code == 200
    body = sales.json()
    assert body["superseded_by"] is None and HR not in str(body)
    assert "a newer statement" in body["why_not"]

    hr = _as(client, world, "hr").get(
        reverse("knowledge-api:fact", args=[learned.fact.pk]), {"memory": "team"}
    )
    assert hr.json()["supersedes"] == [] and SALES not in str(hr.json())


def test_a_restatement_cites_where_it_was_said_so_relabelling_that_note_takes_the_fact_along(
    client, world
):
    kit = Fact.objects.as_system("the test's fact").get(text__startswith="The demo kit")
    second = world.sources["kit-2"]
    assert kit.passages.filter(source=second).exists()

    sales = _as(client, world, "sales")
    listed = sales.get(reverse("knowledge-api:facts"), {"memory": "team", "status": "all"}).json()
    assert kit.pk not in [row["id"] for row in listed["results"]]
    explained = _as(client, world, "hr").get(
        reverse("knowledge-api:fact", args=[kit.pk]), {"memory": "team"}
    )
    assert explained.status_code == 404  # HR reads the copy, not the Sales note it repeats


def test_explain_names_no_source_its_reader_may_not_read(client, world):
    sales_label = Label.objects.get(memory=world.team, name="Sales")
    kit = Fact.objects.as_system("the test's fact").get(text__startswith="The demo kit")
    passages.set_labels(
        list(Passage.objects.as_system("the test").filter(source=world.sources["kit-2"])),
        [sales_label],
    )
    shown = (
        _as(client, world, "sales")
        .get(reverse("knowledge-api:fact", args=[kit.pk]), {"memory": "team"})
        .json()
    )
    sources = {o["source"]["title"] for o in shown["observations"] if o["source"]}
    assert sources == {"Office kit", f"Office kit ({HR} copy)"}
    passages.set_labels(
        list(Passage.objects.as_system("the test").filter(source=world.sources["kit-2"])),
        [Label.objects.get(memory=world.team, name="HR")],
    )
    Fact.objects.as_system("the test").filter(pk=kit.pk)  # the fact now cites an HR passage
    hidden = _as(client, world, "sales").get(
        reverse("knowledge-api:fact", args=[kit.pk]), {"memory": "team"}
    )
    assert hidden.status_code == 404


# Status, Home Assistant and every count -----------------------------------------------------------


def test_the_status_api_counts_only_what_the_person_asking_may_read(client, world):
    answer = _as(client, world, "norole").get(reverse("review-api:status"), {"memory": "team"})
    sensors = answer.json()
    assert sensors["memory_facts_learned"]["state"] == 0
    assert sensors["memory_last_learned"]["attributes"] == {"text": None, "id": None}
    assert HR not in answer.content.decode() and SALES not in answer.content.decode()


def test_measurements_and_the_brief_count_for_their_reader(world):
    reader = world.people["norole"]
    measured = {
        m.key: m.value
        for m in measurements.measure(world.team, counts.for_reader(world.team, reader))
    }
    assert measured["known"] == "0" and measured["week"] == "0"
    said = brief.compose(world.team, reader=reader)
    assert "Nothing new was learned" in said and "Nothing is waiting" in said

    sales = {
        m.key: m.value
        for m in measurements.measure(
            world.team, counts.for_reader(world.team, world.people["sales"])
        )
    }
    assert int(sales["known"]) > 0


def test_home_assistant_sensors_hold_what_every_member_reads(world):
    sensors = status.sensors(world.team, reader=visibility.household(world.team))
    assert sensors["memory_facts_learned"]["state"] == 0
    assert sensors["memory_last_learned"]["attributes"]["text"] is None


# Labels ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Sa\u200bles", "Ｓａｌｅｓ", "sales", " SALES ", "Sal\u00adesﾠ"])
def test_a_label_name_that_reads_like_another_is_refused_naming_it(world, name):
    label = Label(memory=world.team, name=name)
    with pytest.raises(ValidationError) as refused:
        label.full_clean()
    assert "“Sales”" in str(refused.value)


def test_the_admin_refuses_a_look_alike_label_and_keeps_the_form(client, world):
    client.force_login(world.superuser)
    answer = client.post(
        reverse("admin:knowledge_label_add"),
        {"memory": world.team.pk, "name": "Ｈ\u200bＲ", "meaning": "Pay"},
    )
    assert answer.status_code == 200
    assert "reads like the label “HR”" in answer.content.decode()
    assert Label.objects.filter(memory=world.team).count() == 2


def test_a_new_label_in_the_admin_takes_no_label_from_any_passage(client, world):
    """The team's default labels are Sales and HR; lines taught there carry both. Adding a
    label relabels the memory, which used to strip those lines to no label at all."""
    team = world.team
    Label.objects.filter(memory=team).update(default=True)
    taught = learn(
        Statement.typed(
            memory=team,
            text="The kettle is descaled every month.",
            origin=Origin.TYPED,
            by=world.superuser,
        )
    ).fact
    before = sorted(Fact.objects.readable_by(world.people["sales"]).values_list("pk", flat=True))
    assert taught.pk in before

    client.force_login(world.superuser)
    client.post(
        reverse("admin:knowledge_label_add"),
        {"memory": team.pk, "name": "Legal", "meaning": "Contracts and lawyers"},
    )
    assert Label.objects.filter(memory=team, name="Legal").exists()
    after = sorted(Fact.objects.readable_by(world.people["sales"]).values_list("pk", flat=True))
    assert after == before


def test_a_labelling_rule_labels_a_new_source_and_relabelling_keeps_it(world):
    hr = Label.objects.get(memory=world.team, name="HR")
    rule = LabellingRule.objects.create(memory=world.team, name="Reviews", title_words="review")
    rule.labels.add(hr)
    added = add_source(
        memory=world.team,
        by=world.superuser,
        title="Annual review notes",
        text="Marta Verdi asked for a four-day week.",
    ).source
    assert [label.name for label in added.labels.all()] == ["HR"]
    one = added.passages.as_system("the test").get()
    assert [label.name for label in one.labels.all()] == ["HR"]

    labeller.relabel(memory=world.team)
    assert [label.name for label in one.labels.all()] == ["HR"]


def test_a_labelling_rule_by_sender_labels_an_email_from_that_address(world):
    hr = Label.objects.get(memory=world.team, name="HR")
    rule = LabellingRule.objects.create(memory=world.team, name="Payroll", sender="payroll@acme.it")
    rule.labels.add(hr)
    note = Source(
        memory=world.team,
        kind=Source.Kind.EMAIL,
        title="March",
        text="From: Payroll <payroll@acme.it>\nSubject: March\n\nSalaries are paid on the 27th.",
    )
    assert labelling_rules.labels_for(note) == [hr]
    note.text = "From: someone@acme.it\n\nLunch on Friday."
    assert labelling_rules.labels_for(note) == []


def test_a_labelling_rule_needs_a_condition(world):
    with pytest.raises(ValidationError):
        LabellingRule(memory=world.team, name="Everything").full_clean()


# Derived knowledge -------------------------------------------------------------------------------


def test_an_insight_run_tells_the_model_only_what_every_member_of_the_household_reads(
    world, llm_stub
):
    from brain.tests.stubs.messages import stub_json
    from review import insight
    from review.models import HouseEvent

    llm_stub.script(stub_json({"findings": [], "guesses": []}))
    HouseEvent.objects.create(
        memory=world.home,
        entity_id="light.hall",
        state="on",
        cause="by_hand",
        who="Tom",
        at=world.home.created_at,
    )
    started = insight.start(world.home, send=False)
    insight.execute(started.pk)

    told = " ".join(request.prompt for request in llm_stub.requests)
    assert llm_stub.requests and "bins go out" in told
    assert privacy_world.HEALTH not in told.casefold()


def _conclude_from(llm_stub, fact, words):
    from brain.tests.stubs.messages import stub_json

    llm_stub.script(
        stub_json({"conclusions": [{"statement": words, "because": [fact.pk]}], "gaps": []})
    )


def test_a_study_conclusion_drawn_from_a_private_fact_is_read_only_by_those_who_read_it(
    world, llm_stub
):
    from memory import study
    from memory.models import StudySession

    health = Fact.objects.as_system("the test's fact").get(text__contains=privacy_world.HEALTH)
    _conclude_from(llm_stub, health, "Sarah's mornings start with her heart medicine.")
    started = study.start(memory=world.home, topic="Sarah", by=None, send=False)
    study.execute(started.session.pk)

    conclusion = Fact.objects.as_system("the test's fact").get(text__startswith="Sarah's mornings")
    tom, sarah = world.people["tom"], world.people["sarah"]
    assert not Fact.objects.readable_by(tom).filter(pk=conclusion.pk).exists()
    assert Fact.objects.readable_by(sarah).filter(pk=conclusion.pk).exists()
    sessions = StudySession.objects.filter(pk=started.session.pk)
    assert not sessions.readable_by(tom).exists() and sessions.readable_by(sarah).exists()


def test_a_study_someone_asks_for_tells_the_model_only_what_they_may_read(world, llm_stub):
    from memory import study

    dog = learn(
        Statement.typed(
            memory=world.home,
            text="Sarah walks the dog every morning at seven.",
            origin=Origin.TYPED,
            by=world.people["tom"],
        )
    ).fact
    _conclude_from(llm_stub, dog, "Sarah is up by seven every day.")
    started = study.start(memory=world.home, topic="Sarah", by=world.people["tom"], send=False)
    study.execute(started.session.pk)

    told = " ".join(request.prompt for request in llm_stub.requests)
    assert "walks the dog" in told and privacy_world.HEALTH not in told.casefold()
