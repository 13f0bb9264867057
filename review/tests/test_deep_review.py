"""Deep review: reads the facts, findings and rules, and proposes guesses and findings through
the same limits as everything else."""

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.models import ModelCall
from brain.tests.stubs.messages import stub_json, stub_overloaded
from knowledge.models import Fact, Memory, Subject
from memory import actions as memory_actions
from memory.taught import Statement
from review import deep_review, tasks
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import Finding, Guess, Rule

HALL = "binary_sensor.hall_sensor"
LANDING = "binary_sensor.landing_motion"
THERMOMETER = "sensor.kitchen_thermometer"

OFFLINE_GUESS = "Hall sensor dropping offline briefly is normal"
RULE_GUESS = (
    "Night motion on Landing motion is not a problem because the cat sleeps on the landing "
    "and sets off the motion sensor at night"
)
STALE_GUESS = "The loft is used by guests"
OTHER_GUESSES = ("The dog is fed at 7 and 17", "Guests park on the drive", "The office is upstairs")


@pytest.fixture(autouse=True)
def _no_model(settings):
    """Offline unless a test brings the stub."""
    settings.ANTHROPIC_API_KEY = ""


@pytest.fixture
def devices(home) -> dict[str, Subject]:
    hall = Subject.objects.create(memory=home, kind="room", name="Hall")
    kitchen = Subject.objects.create(memory=home, kind="room", name="Kitchen")
    return {
        HALL: Subject.objects.create(
            memory=home, kind="device", name="Hall sensor", entity_id=HALL, room=hall
        ),
        LANDING: Subject.objects.create(
            memory=home, kind="device", name="Landing motion", entity_id=LANDING, room=hall
        ),
        THERMOMETER: Subject.objects.create(
            memory=home,
            kind="device",
            name="Kitchen thermometer",
            entity_id=THERMOMETER,
            room=kitchen,
        ),
    }


def _learn(home, text, *, about=(), confidence="medium", days_ago=0) -> Fact:
    fact = memory_actions.learn(
        Statement.typed(
            memory=home, text=text, origin="typed", subjects=list(about), confidence=confidence
        )
    ).fact
    if days_ago:
        Fact.objects.filter(pk=fact.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
        fact.refresh_from_db()
    return fact


def _offline_quirk(home) -> list[Fact]:
    return [
        _learn(home, "The hall sensor dropped offline at 2am and came back by itself"),
        _learn(home, "Hall sensor went offline for a minute during the storm"),
        _learn(home, "The hall sensor keeps losing its connection on Sunday mornings"),
    ]


def _landing_rule(home) -> Rule:
    finding = review_findings.raise_finding(
        memory=home,
        check_id="night_motion",
        entity_id=LANDING,
        severity="low",
        text="Motion on the landing at 03:10",
    ).finding
    rule = review_findings.not_a_problem(finding=finding)
    _learn(
        home,
        "The cat sleeps on the landing and sets off the motion sensor at night",
        about=[LANDING],
    )
    return rule


@pytest.fixture
def household(home, devices) -> Memory:
    """A house with a pattern of each kind deep review looks for."""
    _offline_quirk(home)
    _landing_rule(home)
    _learn(home, STALE_GUESS, confidence="low", days_ago=70)
    _learn(home, "The kitchen thermometer's battery is at 12%")
    _learn(home, "Sarah likes the bedroom at 19 degrees")  # nothing to ask about
    return home


def _questions(home) -> set[str]:
    return set(Guess.objects.for_memory(home).values_list("text", flat=True))


# A household with patterns -------------------------------------------------------------------


def test_a_household_with_patterns_gets_the_guesses_and_findings_they_point_to(household):
    report = deep_review.run(household)

    assert _questions(household) == {OFFLINE_GUESS, RULE_GUESS, STALE_GUESS}
    assert Guess.objects.for_memory(household).open().count() == 3
    (finding,) = Finding.objects.for_memory(household).open().filter(check_id="battery_low")
    assert finding.entity_id == THERMOMETER
    assert finding.severity == "low"
    assert finding.text == "Kitchen thermometer: battery low (12%)"
    assert (report.guesses_asked, report.guesses_waiting, report.guesses_refused) == (3, 0, 0)
    assert (report.findings_raised, report.findings_quiet, report.findings_seen) == (1, 0, 0)
    assert report.text == (
        "Deep review of Home read 7 facts, 1 finding and 1 rule. Guesses: 3 guesses asked. "
        "Findings: 1 finding raised."
    )


def test_each_guess_says_what_made_brain_wonder_and_what_it_is_about(household, devices):
    deep_review.run(household)

    offline = Guess.objects.get(text=OFFLINE_GUESS)
    assert offline.subject == devices[HALL]
    assert offline.why.startswith("3 facts about Hall sensor say it does this")
    assert offline.question == f"{OFFLINE_GUESS} — right?"
    rule = Guess.objects.get(text=RULE_GUESS)
    assert rule.subject == devices[LANDING]
    assert "You set a rule (Not raised: “night_motion” on Landing motion)" in rule.why
    stale = Guess.objects.get(text=STALE_GUESS)
    assert stale.why.startswith("Taught once, with low confidence, 70 days ago")


def test_running_it_twice_proposes_nothing_new(household):
    deep_review.run(household)
    guesses, findings = Guess.objects.count(), Finding.objects.count()

    again = deep_review.run(household)

    assert (Guess.objects.count(), Finding.objects.count()) == (guesses, findings)
    assert Finding.objects.get(check_id="battery_low").times_raised == 1
    assert (again.guesses_proposed, again.guesses_refused) == (0, 3)
    assert (again.findings_raised, again.findings_seen) == (0, 1)
    assert again.text.endswith(
        "Guesses: 3 not asked again (already asked or answered). Findings: 1 already seen."
    )


def test_an_answered_guess_is_not_proposed_again(household):
    deep_review.run(household)
    for guess in Guess.objects.for_memory(household):
        review_guesses.answer_guess(guess=guess, answer="no")

    again = deep_review.run(household)

    assert again.guesses_proposed == 0
    assert not Guess.objects.for_memory(household).open().exists()


def test_with_three_guesses_open_new_ones_wait(household):
    for text in OTHER_GUESSES:
        review_guesses.propose_guess(memory=household, text=text)

    report = deep_review.run(household)

    assert (report.guesses_asked, report.guesses_waiting) == (0, 3)
    assert "Guesses: 3 waiting for a free slot." in report.text
    waiting = Guess.objects.for_memory(household).filter(state=Guess.State.WAITING)
    assert set(waiting.values_list("text", flat=True)) == {OFFLINE_GUESS, RULE_GUESS, STALE_GUESS}
    assert Guess.objects.for_memory(household).open().count() == 3

    first_open = Guess.objects.for_memory(household).open().order_by("pk").first()
    review_guesses.answer_guess(guess=first_open, answer="yes")
    assert Guess.objects.get(text=RULE_GUESS).state == Guess.State.OPEN  # oldest worked out


def test_at_most_three_guesses_are_worked_out_in_one_run(home, devices):
    for n, text in enumerate(
        (
            "The spare key is under the mat",
            "The router lives in the under-stairs cupboard",
            "Bins go out on Tuesday",
            "The loft hatch sticks in summer",
            "The shed roof leaks onto the bikes",
        )
    ):
        _learn(home, text, confidence="low", days_ago=90 - n)

    first = deep_review.run(home)
    assert first.guesses_proposed == 3

    second = deep_review.run(home)  # the rest, next time
    assert (second.guesses_proposed, second.guesses_refused) == (2, 3)


# Guesses: only what the patterns support ---------------------------------------------------


def test_two_facts_about_a_quirk_are_not_yet_a_pattern(home, devices):
    _offline_quirk(home)[0].delete()

    deep_review.run(home)

    assert OFFLINE_GUESS not in _questions(home)


def test_a_quirk_already_known_to_be_normal_is_not_asked(home, devices):
    _offline_quirk(home)
    _learn(home, "The hall sensor going offline for a minute is normal")

    deep_review.run(home)

    assert OFFLINE_GUESS not in _questions(home)


def test_a_fact_saying_it_did_not_happen_is_no_evidence(home, devices):
    facts = _offline_quirk(home)
    facts[0].delete()
    _learn(home, "The hall sensor has not dropped offline since the new hub")

    deep_review.run(home)

    assert OFFLINE_GUESS not in _questions(home)


def test_quirks_on_different_devices_are_asked_about_separately(home, devices):
    _offline_quirk(home)
    for text in (
        "The kitchen thermometer dropped offline on Monday",
        "Kitchen thermometer went offline again overnight",
        "The kitchen thermometer is unavailable for a few minutes most days",
    ):
        _learn(home, text)

    deep_review.run(home)

    assert {OFFLINE_GUESS, "Kitchen thermometer dropping offline briefly is normal"} <= (
        _questions(home)
    )


def test_a_rule_whose_device_has_no_fact_saying_why_is_not_explained(home, devices):
    finding = review_findings.raise_finding(
        memory=home, check_id="night_motion", entity_id=LANDING, severity="low", text="Motion"
    ).finding
    review_findings.not_a_problem(finding=finding)
    _learn(home, "The landing motion sensor was installed in 2021", about=[LANDING])

    report = deep_review.run(home)

    assert report.guesses_proposed == 0


def test_a_protected_check_is_never_explained_away(home, devices):
    Subject.objects.create(
        memory=home, kind="device", name="Sink leak", entity_id="binary_sensor.sink_leak"
    )
    finding = review_findings.raise_finding(
        memory=home, check_id="leak", entity_id="binary_sensor.sink_leak", severity="high",
        text="Leak under the sink",
    ).finding  # fmt: skip
    review_findings.not_a_problem(finding=finding)
    _learn(home, "The sink leak sensor reports a leak when the floor is mopped")

    report = deep_review.run(home)

    assert report.guesses_proposed == 0


@pytest.mark.parametrize(
    ("confidence", "days_ago"),
    [("low", 30), ("medium", 90), ("high", 90)],
)
def test_only_an_old_low_confidence_fact_is_asked_again(home, confidence, days_ago):
    _learn(home, STALE_GUESS, confidence=confidence, days_ago=days_ago)

    assert deep_review.run(home).guesses_proposed == 0


def test_a_stale_fact_that_was_said_again_or_borne_out_is_not_asked(home):
    said_twice = _learn(home, STALE_GUESS, confidence="low", days_ago=90)
    _learn(home, STALE_GUESS)
    borne_out = _learn(home, "The porch light is on a timer", confidence="low", days_ago=90)
    Fact.objects.filter(pk=borne_out.pk).update(successes=1)

    said_twice.refresh_from_db()
    assert said_twice.support == 2
    assert deep_review.run(home).guesses_proposed == 0


def test_yes_to_a_stale_fact_strengthens_it(home):
    fact = _learn(home, STALE_GUESS, confidence="low", days_ago=90)
    deep_review.run(home)

    review_guesses.answer_guess(guess=Guess.objects.get(text=STALE_GUESS), answer="yes")

    fact.refresh_from_db()
    assert fact.support == 2
    assert deep_review.run(home).guesses_proposed == 0


# Findings from facts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "raised"),
    [
        ("The kitchen thermometer's battery is at 12%", True),
        ("Kitchen thermometer battery at 20 percent", True),
        ("The kitchen thermometer is on 5% battery", True),
        ("The kitchen thermometer's battery is at 21%", False),
        ("The kitchen thermometer's signal is at 10%", False),
    ],
)
def test_a_battery_at_or_below_twenty_percent_is_a_low_finding(home, devices, text, raised):
    _learn(home, text)

    report = deep_review.run(home)

    assert report.findings_raised == int(raised)
    assert Finding.objects.filter(check_id="battery_low").exists() is raised


def test_only_the_newest_battery_note_counts(home, devices):
    _learn(home, "The kitchen thermometer's battery is at 8%", days_ago=3)
    _learn(home, "The kitchen thermometer has a new battery, now at 100% battery")

    assert deep_review.run(home).findings_raised == 0


def test_rules_keep_findings_quiet(home, devices):
    earlier = review_findings.raise_finding(
        memory=home,
        check_id="battery_low",
        entity_id=THERMOMETER,
        severity="low",
        text="Kitchen thermometer: battery low",
    ).finding
    review_findings.not_a_problem(finding=earlier, reason="It runs on mains; the reading is wrong.")
    Finding.objects.filter(pk=earlier.pk).update(
        first_raised_at=timezone.now() - timedelta(days=5),
        last_raised_at=timezone.now() - timedelta(days=5),
        settled_at=timezone.now() - timedelta(days=5),
    )
    _learn(home, "The kitchen thermometer's battery is at 12%")

    report = deep_review.run(home)

    assert (report.findings_raised, report.findings_quiet) == (0, 1)
    assert "Findings: 1 kept quiet by a rule you set." in report.text
    assert not Finding.objects.for_memory(home).open().exists()


def test_a_device_rule_keeps_its_battery_quiet_too(home, devices):
    finding = review_findings.raise_finding(
        memory=home, check_id="unavailable", entity_id=THERMOMETER, severity="low", text="Gone"
    ).finding
    review_findings.not_a_problem(finding=finding, scope=Rule.Scope.DEVICE)
    _learn(home, "The kitchen thermometer's battery is at 12%")

    assert deep_review.run(home).findings_quiet == 1


def test_a_battery_fixed_since_the_note_is_not_raised_again(home, devices):
    _learn(home, "The kitchen thermometer's battery is at 12%")
    deep_review.run(home)
    review_findings.mark_fixed(finding=Finding.objects.get(check_id="battery_low"))

    report = deep_review.run(home)

    assert report.findings_seen == 1
    assert Finding.objects.get(check_id="battery_low").state == Finding.State.SUPPRESSED


# The task ----------------------------------------------------------------------------------


def test_the_task_runs_a_started_review_once_and_keeps_its_report(
    household, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as sent:
        started = deep_review.start(memory=household)
        again = deep_review.start(memory=household)
    assert again.pk == started.pk and len(sent) == 1  # one running review at a time

    tasks.deep_review(started.pk)
    tasks.deep_review(started.pk)  # delivered twice: the second finds it settled

    started.refresh_from_db()
    assert started.state == "done"
    assert started.report.startswith(f"Deep review of {household.name} read ")
    assert Guess.objects.for_memory(household).count() == 3
    tasks.deep_review(started.pk + 1000)  # no such review: nothing happens


# With a model configured -----------------------------------------------------------------


@pytest.fixture
def stub(llm_stub, settings):
    return llm_stub


def test_the_model_may_add_guesses_through_the_same_limits(home, devices, stub):
    rejected = review_guesses.propose_guess(
        memory=home, text="The garage fridge is meant to run 24/7"
    )
    review_guesses.answer_guess(guess=rejected.guess, answer="no")
    stub.script(
        stub_json(
            {
                "guesses": [
                    {"statement": "The garage fridge is meant to run 24/7", "why": "draws power"},
                    {
                        "statement": "The hall sensor is in the downstairs hallway",
                        "about": HALL,
                        "why": "it is called the hall sensor",
                    },
                    {"statement": "Guests use the loft at weekends"},
                    {"statement": "One too many"},
                ]
            }
        )
    )

    report = deep_review.run(home)

    assert (report.guesses_asked, report.guesses_refused) == (2, 1)
    assert report.model == "The model suggested 3 guesses."
    hallway = Guess.objects.get(text="The hall sensor is in the downstairs hallway")
    assert hallway.subject == devices[HALL]
    assert not Guess.objects.filter(text="One too many").exists()
    call = ModelCall.objects.get()
    assert call.task == "deep_review"
    assert "Already answered (do not suggest again):" in stub.requests[0].prompt
    assert "The garage fridge is meant to run 24/7 (rejected)" in stub.requests[0].prompt


def test_when_the_model_fails_the_heuristics_stand_alone(home, devices, stub):
    _offline_quirk(home)
    _learn(home, "The kitchen thermometer's battery is at 12%")
    stub.script(stub_overloaded())

    report = deep_review.run(home)

    assert len(stub.requests) == 1
    assert _questions(home) == {OFFLINE_GUESS}
    assert report.findings_raised == 1
    assert "Overloaded" in report.model and "the offline checks ran alone" in report.model


def test_the_model_is_not_asked_when_the_heuristics_spent_the_run(household, stub):
    deep_review.run(household)

    assert stub.requests == []


def test_the_model_is_not_asked_while_three_guesses_are_open(home, stub):
    for text in OTHER_GUESSES:
        review_guesses.propose_guess(memory=home, text=text)

    report = deep_review.run(home)

    assert stub.requests == []
    assert report.model == "The model was not asked: 3 guesses are open."


def test_a_model_answer_in_the_wrong_shape_is_not_used(home, stub):
    stub.script(stub_json({"guesses": [{"about": "the loft"}]}))

    report = deep_review.run(home)

    assert report.guesses_proposed == 0
    assert "could not be used" in report.model
    assert ModelCall.objects.get().state == "invalid"
