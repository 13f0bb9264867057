"""Study sessions: brain learn <topic>, brain learn (the stalest subject), POST /api/study/ and the
Study button. A background run that reviews what is known about one subject, reports what is
stale, thin or contradictory, and with a model files its conclusions through the inbox."""

from __future__ import annotations

import dataclasses
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from brain.models import ModelCall
from brain.tests.stubs.messages import stub_error, stub_hang, stub_json, stub_text
from knowledge.actions import record_outcome
from knowledge.models import Conflict, Fact, Memory, Observation, Source, Subject
from knowledge.read_layer import SYSTEM
from memory import actions, study
from memory.models import InboxItem, StudySession
from memory.taught import Statement

HEAT_PUMP = "Heat pump"
OLD = timedelta(days=120)


@pytest.fixture(autouse=True)
def _no_model(settings):
    """Offline unless a test brings the stub."""
    settings.ANTHROPIC_API_KEY = ""


@pytest.fixture
def heat_pump(home) -> Subject:
    return Subject.objects.create(
        memory=home, kind="device", name=HEAT_PUMP, entity_id="climate.heat_pump"
    )


def _teach(home, text, *, about=(), confidence="medium", age=timedelta(0)) -> Fact:
    fact = actions.learn(
        Statement.typed(
            memory=home, text=text, origin="typed", subjects=list(about), confidence=confidence
        )
    ).fact
    if age:
        then = timezone.now() - age
        Fact.objects.filter(pk=fact.pk).update(created_at=then, valid_from=then)
        Observation.objects.filter(fact=fact).update(created_at=then)
        fact.refresh_from_db()
    return fact


@pytest.fixture
def known(home, heat_pump) -> dict[str, Fact]:
    """What is known about the heat pump: one fact stale, one thin, two in conflict."""
    stale = _teach(home, "The heat pump runs on weather compensation", about=[heat_pump], age=OLD)
    thin = _teach(
        home, "The heat pump flow temperature is 45 degrees", about=[heat_pump], confidence="low"
    )
    older = _teach(home, "The heat pump means the Daikin unit in the garden", about=[heat_pump])
    newer = _teach(home, "The heat pump means the Vaillant unit in the garden", about=[heat_pump])
    assert Conflict.objects.filter(old=older, new=newer).exists()
    return {"stale": stale, "thin": thin, "older": older, "newer": newer}


def _learn(*args: str) -> str:
    out = io.StringIO()
    call_command("learn", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _session() -> StudySession:
    return StudySession.objects.get()


# Offline: it reports, it files nothing -------------------------------------------------------


def test_brain_learn_a_topic_reports_what_is_stale_thin_or_contradictory_and_files_nothing(
    home, known
):
    waiting = InboxItem.objects.count()

    printed = _learn("heat", "pump")

    session = _session()
    stale, thin, older, newer = (known[k].pk for k in ("stale", "thin", "older", "newer"))
    assert session.report == (
        f"Studied heat pump: read 4 facts. 1 fact is not taught, said again or acted on for "
        f"90 days: #{stale}. 1 fact rests on one mention at low confidence: #{thin}. 1 pair "
        f"may contradict: #{older} and #{newer} (waiting under To settle: "
        f"{Conflict.objects.get().reason}). Offline: it reports what it found and files "
        "nothing new."
    )
    assert printed.startswith("Studying heat pump…\n")
    assert printed.endswith(session.report + "\n")
    assert (session.state, session.facts_read, session.stale, session.thin) == ("done", 4, 1, 1)
    assert session.subject == Subject.objects.get(name=HEAT_PUMP)
    assert InboxItem.objects.count() == waiting
    assert not ModelCall.objects.exists()


def test_two_live_facts_the_judge_calls_a_contradiction_are_reported(home, heat_pump):
    a = _teach(home, "The heat pump is on in winter", about=[heat_pump])
    b = Fact.objects.create(
        memory=home,
        text="The heat pump is off in winter",
        normalized="the heat pump is off in winter",
        channel="typed",
        status="filed",
    )
    b.subjects.add(heat_pump)

    _learn(HEAT_PUMP)

    assert f"1 pair may contradict: #{a.pk} and #{b.pk} (" in _session().report


def test_a_topic_nothing_is_known_about_is_reported_as_a_gap(home):
    _learn("solar panels")

    assert _session().report == (
        "Studied solar panels: read 0 facts. Little is known about solar panels: nothing yet. "
        "Offline: it reports what it found and files nothing new."
    )


# The stalest subject --------------------------------------------------------------------------


def test_brain_learn_alone_studies_the_subject_least_recently_confirmed_or_used(home, heat_pump):
    fridge = Subject.objects.create(memory=home, kind="device", name="Garage fridge")
    _teach(home, "The heat pump runs on weather compensation", about=[heat_pump], age=OLD)
    used = _teach(home, "The garage fridge is meant to run 24/7", about=[fridge], age=OLD * 2)

    assert study.stalest_subject(home, SYSTEM) == fridge  # taught longest ago, never used

    record_outcome(fact=used, success=True)  # acting on it: fresh again
    assert study.stalest_subject(home, SYSTEM) == heat_pump

    printed = _learn()
    assert printed.startswith(f"Studying {HEAT_PUMP}…")
    assert (_session().topic, _session().chosen) == (HEAT_PUMP, True)


def test_saying_a_fact_again_makes_its_subject_fresh(home, heat_pump):
    fridge = Subject.objects.create(memory=home, kind="device", name="Garage fridge")
    _teach(home, "The heat pump runs on weather compensation", about=[heat_pump], age=OLD)
    _teach(home, "The garage fridge is meant to run 24/7", about=[fridge], age=OLD * 2)

    actions.learn(
        Statement.typed(memory=home, text="The garage fridge is meant to run 24/7", origin="typed")
    )

    assert study.stalest_subject(home, SYSTEM) == heat_pump


def test_with_nothing_known_brain_learn_says_there_is_nothing_to_study(home):
    with pytest.raises(CommandError, match="Nothing to study yet: no subject has a fact"):
        _learn()
    assert not StudySession.objects.exists()


# With a model ---------------------------------------------------------------------------------


def test_with_a_model_conclusions_citing_the_facts_are_filed_through_the_inbox(
    home, known, llm_stub
):
    stale = known["stale"].pk
    llm_stub.script(
        stub_json(
            {
                "conclusions": [
                    {"statement": "The heat pump is a low-temperature system",
                     "because": [stale, known["thin"].pk]},
                    {"statement": "The heat pump was installed in 2019", "because": [999999]},
                    {"statement": "Is the heat pump a Daikin?", "because": [stale]},
                    {"statement": "The heat pump is defrosting right now", "because": [stale]},
                ],
                "gaps": ["when it was last serviced"],
            }
        )
    )  # fmt: skip

    study.execute(study.start(memory=home, topic=HEAT_PUMP, send=False).session.pk)

    session = _session()
    item = InboxItem.objects.get(text="The heat pump is a low-temperature system")
    assert (item.origin, item.confidence) == ("study", "low")
    assert item.fact.source.kind == Source.Kind.STUDY
    assert item.fact.source.title.startswith(f"Study session #{session.pk} on {HEAT_PUMP}, ")
    assert session.filed == 1
    assert session.report.endswith(
        "Gaps: when it was last serviced. Filed 1 conclusion through the inbox."
    )
    assert any("cites none of the facts read" in line for line in session.lines)
    assert sum("not a durable statement" in line for line in session.lines) == 1
    assert not any("defrosting" in line for line in session.lines)  # at most 3 are read
    assert f"[{stale}] The heat pump runs on weather compensation" in llm_stub.requests[0].prompt
    assert ModelCall.objects.get().task == "study"


@pytest.mark.parametrize(
    "reply",
    [
        stub_error(529, "overloaded_error", "Overloaded"),
        stub_text("The heat pump seems fine to me."),
        stub_json({"conclusions": "several"}),
        stub_hang(10),
    ],
    ids=["failing", "not JSON", "malformed", "too slow"],
)
def test_a_model_that_fails_files_nothing_and_the_report_says_why(
    home, known, llm_stub, monkeypatch, reply
):
    monkeypatch.setattr(study, "STUDY", dataclasses.replace(study.STUDY, timeout=1.0))
    llm_stub.script(reply)
    waiting = InboxItem.objects.count()

    study.execute(study.start(memory=home, topic=HEAT_PUMP, send=False).session.pk)

    session = _session()
    assert session.state == StudySession.State.DONE
    assert "The model could not be used (" in session.report
    assert session.report.endswith("); nothing was filed.")
    assert InboxItem.objects.count() == waiting


# Kill switch, one at a time, claimed once ----------------------------------------------------


def test_with_learning_off_a_study_is_refused_on_every_surface(home, known, signed_in):
    Memory.objects.filter(pk=home.pk).update(learning=False)
    refusal = f"Learning is switched off for {home.name}: nothing is filed until it is back on."

    with pytest.raises(CommandError, match="Learning is switched off"):
        _learn(HEAT_PUMP)
    api = signed_in.post("/api/study/", {"topic": HEAT_PUMP}, content_type="application/json")
    page = signed_in.post("/knowledge/study", {"topic": HEAT_PUMP}, headers={"HX-Request": "true"})

    assert (api.status_code, api.json()["detail"]) == (409, refusal)
    assert refusal in page.headers["HX-Trigger"]
    assert not StudySession.objects.exists()


def test_a_session_started_before_learning_was_switched_off_files_nothing(home, known):
    started = study.start(memory=home, topic=HEAT_PUMP, send=False).session
    Memory.objects.filter(pk=home.pk).update(learning=False)

    study.execute(started.pk)

    assert _session().state == StudySession.State.FAILED
    assert _session().outcome == f"The study of {HEAT_PUMP} failed: learning is switched off."


def test_one_study_runs_at_a_time(home, known, signed_in):
    first = study.start(memory=home, topic=HEAT_PUMP, send=False)

    second = study.start(memory=home, topic="garage", send=False)
    api = signed_in.post("/api/study/", {"topic": "garage"}, content_type="application/json")

    assert first.started and not second.started
    assert second.session == first.session
    assert api.status_code == 409
    assert api.json()["session"]["id"] == first.session.pk
    assert StudySession.objects.count() == 1


def test_a_session_is_claimed_once_and_a_lost_one_is_settled_by_the_next_request(home, known):
    lost = study.start(memory=home, topic=HEAT_PUMP, send=False).session
    StudySession.objects.filter(pk=lost.pk).update(
        claimed_at=timezone.now(), lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert study.execute(lost.pk) is None  # already claimed: delivered twice, run once

    again = study.start(memory=home, topic=HEAT_PUMP, send=False)

    lost.refresh_from_db()
    assert again.started
    assert lost.state == StudySession.State.FAILED
    assert lost.report.startswith("The session was lost")


# The API and the Study button -----------------------------------------------------------------


def test_post_api_study_starts_a_session_whose_progress_and_report_can_be_read(
    home, known, signed_in, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(study, "send_on_commit", lambda name, *args: sent.append((name, args)))

    started = signed_in.post("/api/study/", {"topic": HEAT_PUMP}, content_type="application/json")

    assert started.status_code == 202
    body = started.json()
    assert (body["topic"], body["state"], body["step"]) == (
        HEAT_PUMP,
        "running",
        "Waiting for a worker",
    )
    assert sent == [("memory.tasks.study", (body["id"],))]
    study.execute(body["id"])
    landed = signed_in.get(f"/api/study/{body['id']}").json()
    assert landed["state"] == "done"
    assert landed["report"].startswith("Studied Heat pump: read 4 facts.")


def test_a_topic_over_the_limit_is_refused_naming_the_limit(home, signed_in):
    response = signed_in.post("/api/study/", {"topic": "x" * 201}, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "The topic is 201 characters; the limit is 200. Name a subject or a few words."
    )


def test_the_study_button_shows_the_time_while_it_runs_and_the_report_when_it_lands(
    home, known, signed_in
):
    page = signed_in.get("/knowledge/")
    assert 'id="study-form"' in page.content.decode()

    running = signed_in.post(
        "/knowledge/study", {"topic": HEAT_PUMP}, headers={"HX-Request": "true"}
    ).content.decode()

    session = _session()
    assert f"Studying {HEAT_PUMP}… 0 s" in running
    assert f'hx-get="/knowledge/study/{session.pk}"' in running
    study.execute(session.pk)
    landed = signed_in.get(f"/knowledge/study/{session.pk}", headers={"HX-Request": "true"})
    assert "Studied Heat pump: read 4 facts." in landed.content.decode()
    assert "hx-get" not in landed.content.decode()


def test_the_study_button_works_without_javascript(home, known, signed_in):
    response = signed_in.post("/knowledge/study", {"topic": HEAT_PUMP}, follow=True)

    page = response.content.decode()
    assert response.redirect_chain[-1][0] == "/knowledge/"
    assert f"Studying {HEAT_PUMP}: the session runs in the background." in page
    assert f"Studying {HEAT_PUMP}…" in page


def test_brain_learn_in_the_background_hands_the_session_to_the_worker(
    home, known, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(study, "send_on_commit", lambda name, *args: sent.append(name))

    printed = _learn(HEAT_PUMP, "--background")

    assert printed == f"Study session #{_session().pk} on {HEAT_PUMP} handed to the worker.\n"
    assert sent == ["memory.tasks.study"]
    assert _session().is_running


def test_brain_learn_as_someone_who_may_only_read_is_refused(
    home, known, django_user_model, settings
):
    settings.BRAIN_DEFAULT_PERMISSION = "read"
    django_user_model.objects.create_user(username="guest", password="x")

    with pytest.raises(CommandError, match="teach"):
        _learn(HEAT_PUMP, "--as", "guest")
