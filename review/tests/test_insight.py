"""Insight runs: something done by hand again and again becomes a yes/no guess through the guess
rules, and (with a model) durable findings go through the inbox. Scheduled on beat with Deep
review; learning off stops them."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from brain.celery import app
from brain.models import ModelCall
from brain.tests.stubs.messages import stub_error, stub_json, stub_text
from knowledge.models import Fact, Memory, Source, Subject
from memory import actions as memory_actions
from memory.models import InboxItem
from memory.taught import Statement
from review import deep_review, insight, tasks
from review import guesses as review_guesses
from review.models import DeepReview, Guess, HouseEvent, InsightRun

HALL = "light.hall"
GUESS = "Hall light is switched on by hand at 06:10 on weekdays"
OTHER_GUESSES = ("The loft is used by guests", "Sarah is a light sleeper", "The dog is fed at 7")


@pytest.fixture(autouse=True)
def _no_model(settings):
    """Offline unless a test brings the stub."""
    settings.ANTHROPIC_API_KEY = ""


@pytest.fixture
def hall_light(home) -> Subject:
    return Subject.objects.create(memory=home, kind="device", name="Hall light", entity_id=HALL)


def _days(weekdays: bool, count: int) -> list[date]:
    """The last ``count`` weekdays (or weekend days) before today."""
    found, day = [], timezone.localdate() - timedelta(days=1)
    while len(found) < count:
        if (day.weekday() < 5) == weekdays:
            found.append(day)
        day -= timedelta(days=1)
    return found


def _at(day: date, clock: str) -> datetime:
    hours, minutes = (int(part) for part in clock.split(":"))
    return timezone.make_aware(datetime.combine(day, time(hours, minutes)))


def _happened(home, when: datetime, *, entity=HALL, state="on", cause="by_hand", who="Sarah"):
    subject = Subject.objects.for_memory(home).filter(entity_id=entity).first()
    return HouseEvent.objects.create(
        memory=home, entity_id=entity, subject=subject, state=state, cause=cause, who=who, at=when
    )


def _hall_light_each_weekday_morning(home, days=5):
    clocks = ["06:08", "06:12", "06:10", "06:14", "06:05", "06:11", "06:09"]
    return [
        _happened(home, _at(day, clocks[n % len(clocks)]))
        for n, day in enumerate(_days(True, days))
    ]


def _run(home) -> InsightRun:
    started = insight.start(home, send=False)
    assert started is not None
    finished = insight.execute(started.pk)
    assert finished is not None
    return finished


def _three_open(home):
    for text in OTHER_GUESSES:
        review_guesses.propose_guess(memory=home, text=text)
    assert not review_guesses.slot_free(home)


# A routine done by hand becomes a guess -------------------------------------------------------


def test_a_light_switched_on_by_hand_at_the_same_time_on_weekdays_becomes_a_guess(home, hall_light):
    events = _hall_light_each_weekday_morning(home)

    run = _run(home)

    guess = Guess.objects.get(memory=home)
    assert guess.state == Guess.State.OPEN
    assert guess.question == f"{GUESS} — right?"
    assert guess.subject == hall_light
    assert guess.why.startswith(
        "light.hall was set to on by hand on 5 days in the last 28 days, each time within "
        "15 minutes of 06:10 (events #"
    )
    assert f"#{events[0].pk}" in guess.why
    assert run.state == InsightRun.State.DONE
    assert run.report == (
        "Insight run over Home read 5 house events (5 new) and found 1 thing done by hand at "
        "a regular time. Guesses: 1 guess asked."
    )
    assert not ModelCall.objects.exists()


def test_a_routine_at_weekends_and_one_every_day_are_said_so(home, hall_light):
    for day in _days(False, 4):
        _happened(home, _at(day, "09:30"), entity="cover.lounge_blinds", state="open")
    for day in [*_days(True, 3), *_days(False, 2)]:
        _happened(home, _at(day, "22:45"), entity="lock.back_door", state="locked")

    _run(home)

    assert set(Guess.objects.values_list("text", flat=True)) == {
        "Cover.lounge_blinds is opened by hand at 09:30 at weekends",
        "Lock.back_door is locked by hand at 22:45 every day",
    }


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([("06:10", "automation")] * 5, id="by an automation"),
        pytest.param([("06:10", "by_hand")] * 3, id="three days only"),
        pytest.param(
            [("06:10", "by_hand"), ("09:40", "by_hand"), ("13:05", "by_hand"),
             ("18:30", "by_hand"), ("22:15", "by_hand")],
            id="at scattered times",
        ),
    ],
)  # fmt: skip
def test_what_an_automation_does_or_a_few_scattered_presses_are_not_guesses(
    home, hall_light, events
):
    for day, (clock, cause) in zip(_days(True, len(events)), events, strict=True):
        _happened(home, _at(day, clock), cause=cause)

    run = _run(home)

    assert not Guess.objects.exists()
    assert "found 0 things done by hand" in run.report


def test_what_the_household_already_taught_is_not_asked(home, hall_light):
    memory_actions.learn(
        Statement.typed(
            memory=home,
            text="The hall light is switched on by hand at 06:10 on weekdays",
            origin="typed",
        )
    )
    _hall_light_each_weekday_morning(home)

    run = _run(home)

    assert not Guess.objects.exists()
    assert run.lines[0].startswith("Already known (fact #")


# Through the guess rules ----------------------------------------------------------------------


def test_with_three_guesses_open_the_guess_is_worked_out_and_offered_free_when_a_slot_frees(
    home, hall_light
):
    _three_open(home)
    _hall_light_each_weekday_morning(home)

    run = _run(home)

    waiting = Guess.objects.get(text=GUESS)
    assert waiting.state == Guess.State.WAITING
    assert "1 worked out and waiting for a free slot" in run.report
    review_guesses.answer_guess(guess=Guess.objects.get(text=OTHER_GUESSES[0]), answer="no")
    waiting.refresh_from_db()
    assert waiting.state == Guess.State.OPEN
    assert Guess.objects.for_memory(home).open().count() == 3


def test_a_second_run_does_not_ask_the_same_guess_twice(home, hall_light):
    _hall_light_each_weekday_morning(home)
    _run(home)

    again = _run(home)

    assert Guess.objects.count() == 1
    assert "1 already known, asked or answered" in again.report
    assert "0 new" in again.report


def test_a_rejected_routine_is_never_asked_again_in_any_wording(
    home, hall_light, llm_stub, settings
):
    settings.BRAIN_EMBEDDER = "minilm"  # meaning, not just words, as the app compares guesses
    _hall_light_each_weekday_morning(home)
    llm_stub.script(
        stub_json(
            {"findings": [], "guesses": [{"pattern": 1, "statement": "Someone switches the "
                                          "hall light on by hand around 06:10 on weekdays"}]}
        )
    )  # fmt: skip
    _run(home)
    review_guesses.answer_guess(guess=Guess.objects.get(), answer="no, that's the cleaner")
    calls = len(llm_stub.requests)
    _happened(home, _at(timezone.localdate() - timedelta(days=30), "06:10"))  # nothing new

    again = _run(home)

    assert Guess.objects.count() == 1
    assert Guess.objects.get().state == Guess.State.REJECTED
    assert "already rejected" in again.lines[0]
    assert len(llm_stub.requests) == calls  # nothing new, nothing to word: no call


def test_with_a_model_and_three_guesses_open_no_call_is_spent_working_the_guess_out(
    home, hall_light, llm_stub
):
    _three_open(home)
    _hall_light_each_weekday_morning(home)
    llm_stub.script(stub_json({"findings": [], "guesses": []}))

    run = _run(home)

    assert not Guess.objects.filter(text__icontains="hall light").exists()
    assert "1 not worked out until a slot is free" in run.report
    assert "Patterns of something done by hand, to word:\n(none)" in llm_stub.requests[0].prompt
    assert (
        "06:10" not in llm_stub.requests[0].prompt.split("What the memory")[0].split("to word:")[1]
    )

    review_guesses.answer_guess(guess=Guess.objects.get(text=OTHER_GUESSES[0]), answer="yes")
    llm_stub.script(
        stub_json(
            {"findings": [], "guesses": [{"pattern": 1, "statement": "Someone switches the "
                                          "hall light on by hand at about 06:10 on weekdays"}]}
        )
    )  # fmt: skip
    _run(home)

    worded = Guess.objects.get(text__icontains="hall light")
    assert worded.state == Guess.State.OPEN
    assert worded.text == "Someone switches the hall light on by hand at about 06:10 on weekdays"
    assert f"1. {GUESS}" in llm_stub.requests[-1].prompt


# Findings through the inbox, with a model ----------------------------------------------------


def test_with_a_model_durable_findings_are_filed_through_the_inbox_citing_the_run(
    home, hall_light, llm_stub
):
    for day in _days(True, 6):
        _happened(home, _at(day, "19:00"), entity="light.porch", cause="automation",
                  who="automation.dusk")  # fmt: skip
    llm_stub.script(
        stub_json(
            {
                "findings": [
                    {"statement": "The porch light is switched on by an automation at 19:00",
                     "why": "six evenings"},
                    {"statement": "The porch light is on right now"},
                    {"statement": "The alarm code is 4921"},
                ],
                "guesses": [],
            }
        )
    )  # fmt: skip

    run = _run(home)

    item = InboxItem.objects.get()
    assert item.text == "The porch light is switched on by an automation at 19:00"
    assert (item.origin, item.confidence) == ("insight", "low")
    assert item.fact.source.kind == Source.Kind.INSIGHT
    assert item.fact.source.title.startswith(f"Insight run #{run.pk}, ")
    assert "Filed 1 finding through the inbox." in run.report
    assert any("Not filed (not a durable statement)" in line for line in run.lines)
    assert not Fact.objects.filter(text__icontains="4921").exists()
    refused = [line for line in run.lines if line.startswith("Not filed: That looks like")]
    assert len(refused) == 1 and "brain does not keep secrets" in refused[0]
    assert llm_stub.requests[0].body["messages"][0]["content"]
    assert ModelCall.objects.get().task == "insight"


@pytest.mark.parametrize(
    "reply",
    [
        stub_error(500, "api_error", "Internal error"),
        stub_text("I think the hall light is a routine."),
        stub_json({"findings": "lots"}),
    ],
    ids=["failing", "not JSON", "malformed"],
)
def test_a_model_that_fails_files_nothing_and_the_offline_guess_stands(
    home, hall_light, llm_stub, reply
):
    _hall_light_each_weekday_morning(home)
    llm_stub.script(reply)

    run = _run(home)

    assert Guess.objects.get().text == GUESS
    assert not InboxItem.objects.exists()
    assert "The model could not be used" in run.report
    assert run.state == InsightRun.State.DONE


# Kill switch, the lease and the schedule -----------------------------------------------------


def test_with_learning_off_no_insight_run_starts_and_a_started_one_looks_at_nothing(
    home, hall_light
):
    _hall_light_each_weekday_morning(home)
    started = insight.start(home, send=False)
    Memory.objects.filter(pk=home.pk).update(learning=False)

    assert insight.start(home, send=False) is None
    skipped = insight.execute(started.pk)

    assert skipped.state == InsightRun.State.SKIPPED
    assert skipped.report == "Learning is switched off: nothing looked at."
    assert not Guess.objects.exists()
    assert insight.every_memory() == []


def test_a_run_is_claimed_once_and_one_runs_at_a_time(home):
    started = insight.start(home, send=False)

    assert insight.start(home, send=False) is None  # one is running
    assert insight.execute(started.pk) is not None
    assert insight.execute(started.pk) is None  # delivered twice: done once


def test_a_run_whose_worker_died_is_settled_by_the_next_start(home):
    lost = insight.start(home, send=False)
    InsightRun.objects.filter(pk=lost.pk).update(
        claimed_at=timezone.now(), lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    again = insight.start(home, send=False)

    lost.refresh_from_db()
    assert again is not None
    assert lost.state == InsightRun.State.FAILED
    assert lost.report.startswith("The run was lost")


def test_insight_runs_and_deep_review_are_on_the_beat_schedule():
    schedule = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}

    assert {"review.tasks.insight_every_memory", "review.tasks.deep_review_every_memory"} <= (
        schedule
    )
    assert {"review.tasks.insight", "review.tasks.insight_every_memory"} <= set(app.tasks)


def test_the_beat_task_starts_a_run_and_deep_review_for_every_learning_memory(
    home, django_capture_on_commit_callbacks, monkeypatch
):
    quiet = Memory.objects.create(slug="quiet", name="Quiet", learning=False)
    sent = []
    monkeypatch.setattr(insight, "send_on_commit", lambda name, *args: sent.append(name))
    monkeypatch.setattr(deep_review, "send_on_commit", lambda name, *args: sent.append(name))

    tasks.insight_every_memory()
    tasks.deep_review_every_memory()

    assert sent == ["review.tasks.insight", "review.tasks.deep_review"]
    assert InsightRun.objects.get().memory == home
    assert DeepReview.objects.get().memory == home
    assert not InsightRun.objects.filter(memory=quiet).exists()
