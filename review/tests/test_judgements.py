"""Judgements: what brain has learned about its own calls, by arithmetic over the findings.

"Night motion on the hall landing is the cat — 4 of 4 it raised were marked not a problem."
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import Fact, Subject
from memory import actions as memory_actions
from review import findings as review_findings
from review import judgements
from review.models import Finding, Judgement, Rule

LANDING = "binary_sensor.landing_motion"
CHECK = "night_motion"


@pytest.fixture
def landing(home) -> Subject:
    return Subject.objects.create(
        memory=home, kind="device", name="Hall landing", entity_id=LANDING
    )


def _raise(home, *, check_id=CHECK, entity_id=LANDING, text="Motion on the landing at 03:10"):
    raised = review_findings.raise_finding(
        memory=home, check_id=check_id, entity_id=entity_id, severity="low", text=text
    )
    assert raised.finding is not None, raised.message
    return raised.finding


def _not_a_problem(home, *, reason="the cat", **kwargs) -> Finding:
    """Raised, marked not a problem for a month, and the month run out: ready to come again."""
    finding = _raise(home, **kwargs)
    rule = review_findings.not_a_problem(finding=finding, reason=reason, until="month")
    Rule.objects.filter(pk=rule.pk).update(until=timezone.now() - timedelta(seconds=1))
    return finding


def _fixed(home, **kwargs) -> Finding:
    """Raised, fixed, and the fix held long enough to lapse: a real problem, now closed."""
    finding = _raise(home, **kwargs)
    review_findings.mark_fixed(finding=finding)
    review_findings.lapse_suppressions(now=timezone.now() + timedelta(days=91))
    return finding


def _judgement_facts(home):
    return Fact.objects.for_memory(home).live().filter(kind=Fact.Kind.JUDGEMENT)


# The arithmetic -----------------------------------------------------------------------------


def test_four_of_four_marked_not_a_problem_is_a_judgement(home, landing):
    for _ in range(4):
        _not_a_problem(home, reason="The cat.")

    (fact,) = _judgement_facts(home)
    assert fact.text == (
        "Night motion on hall landing is the cat — 4 of 4 it raised were marked not a problem."
    )
    assert fact.kind == Fact.Kind.JUDGEMENT
    assert list(fact.subjects.all()) == [landing]
    in_thirty_days = timezone.now() + timedelta(days=30)
    assert in_thirty_days - timedelta(minutes=1) < fact.expires_at <= in_thirty_days
    judgement = Judgement.objects.get()
    assert (judgement.raised, judgement.marked_not_a_problem) == (4, 4)
    assert judgement.fact == fact


def test_the_latest_reason_given_is_the_one_written(home, landing):
    for reason in ("a spider", "", "the cat", ""):
        _not_a_problem(home, reason=reason)

    assert "is the cat — 4 of 4" in _judgement_facts(home).get().text


@pytest.mark.parametrize(
    ("reason", "claim"),
    [
        ("It's the cat.", "is the cat —"),
        ("Just the cat", "is just the cat —"),
        ("Sarah's cat", "is Sarah's cat —"),
    ],
)
def test_the_reason_reads_as_a_claim(home, landing, reason, claim):
    for _ in range(4):
        _not_a_problem(home, reason=reason)

    assert f"Night motion on hall landing {claim} 4 of 4" in _judgement_facts(home).get().text


def test_without_a_reason_it_says_usually_not_a_problem(home, landing):
    for _ in range(4):
        _not_a_problem(home, reason="")

    assert _judgement_facts(home).get().text == (
        "Night motion on hall landing is usually not a problem — 4 of 4 it raised were marked "
        "not a problem."
    )


def test_two_of_two_is_too_few_to_judge(home, landing):
    for _ in range(2):
        _not_a_problem(home)

    assert not _judgement_facts(home).exists()
    assert not Judgement.objects.exists()


def test_three_of_five_is_too_small_a_share_to_judge(home, landing):
    _fixed(home)
    _fixed(home)
    for _ in range(3):
        _not_a_problem(home)

    assert Finding.objects.for_memory(home).count() == 5
    assert not _judgement_facts(home).exists()
    assert not Judgement.objects.exists()


def test_the_counts_are_worked_out_from_mixed_outcomes(home, landing):
    _fixed(home)
    for _ in range(3):
        _not_a_problem(home)  # 3 of 4: three quarters, just enough
    assert "3 of 4 it raised" in _judgement_facts(home).get().text

    _not_a_problem(home)

    (fact,) = _judgement_facts(home)  # the 3-of-4 fact was replaced, not kept beside it
    assert "is the cat — 4 of 5 it raised were marked not a problem." in fact.text
    judgement = Judgement.objects.get()
    assert (judgement.raised, judgement.marked_not_a_problem) == (5, 4)
    assert judgement.fact == fact


def test_other_checks_and_other_things_are_counted_apart(home, landing):
    Subject.objects.create(memory=home, kind="device", name="Hall", entity_id="binary_sensor.hall")
    for _ in range(2):
        _not_a_problem(home)
        _not_a_problem(home, check_id="door_left_open")
        _not_a_problem(home, entity_id="binary_sensor.hall")

    assert not _judgement_facts(home).exists()


# Never about what is protected, never about a person ------------------------------------------


@pytest.mark.parametrize("check_id", ["leak", "smoke", "gas", "freeze", "water_leak"])
def test_no_judgement_is_ever_written_about_a_protected_finding(home, landing, check_id):
    for _ in range(5):
        finding = _raise(home, check_id=check_id, text="Sensor tripped")
        assert finding.protected
        review_findings.not_a_problem(finding=finding, reason="the test button")

    assert Finding.objects.filter(check_id=check_id, state="not_a_problem").count() == 5
    assert not _judgement_facts(home).exists()
    assert not Judgement.objects.exists()


def test_no_judgement_is_written_about_a_person(home):
    Subject.objects.create(memory=home, kind="person", name="Sarah", entity_id="person.sarah")
    for _ in range(4):
        _not_a_problem(home, check_id="late_return", entity_id="person.sarah", text="Back late")

    assert not _judgement_facts(home).exists()


def test_no_judgement_is_written_about_a_tracked_device(home):
    Subject.objects.create(
        memory=home, kind="device", name="Sarah's phone", entity_id="device_tracker.sarah_phone"
    )
    for _ in range(4):
        _not_a_problem(
            home, check_id="left_unplugged", entity_id="device_tracker.sarah_phone", text="Off"
        )

    assert not _judgement_facts(home).exists()


@pytest.mark.parametrize(
    ("check_id", "text"),
    [
        ("sleep_disturbed", "Bedroom motion at 02:00"),
        ("presence_mismatch", "Landing motion while nobody is in"),
        ("night_motion", "Sarah is awake at 03:00"),
    ],
)
def test_no_judgement_is_written_about_sleep_or_whereabouts(home, landing, check_id, text):
    for _ in range(4):
        _not_a_problem(home, check_id=check_id, text=text)

    assert not _judgement_facts(home).exists()


# A later real finding on the same thing forgets it ----------------------------------------


@pytest.fixture
def judged(home, landing) -> Fact:
    for _ in range(4):
        _not_a_problem(home)
    return _judgement_facts(home).get()


def test_a_later_finding_marked_fixed_forgets_the_judgement(home, judged):
    finding = _raise(home)
    assert judged in _judgement_facts(home)  # raising alone decides nothing

    review_findings.mark_fixed(finding=finding)

    judged.refresh_from_db()
    assert judged.status == Fact.Status.FORGOTTEN
    assert judged.forgotten_reason == judgements.REFUTED
    assert not _judgement_facts(home).exists()
    assert not Judgement.objects.exists()


def test_a_finding_raised_again_after_its_fix_forgets_the_judgement(home, landing, judged):
    finding = _raise(home)
    review_findings.mark_fixed(finding=finding)
    # The arithmetic written again while the fix holds (4 of 5 marked not a problem).
    rewritten = judgements.recount(memory=home, check_id=CHECK, subject=landing)
    assert "4 of 5" in rewritten.fact.text

    again = review_findings.raise_finding(
        memory=home, check_id=CHECK, entity_id=LANDING, severity="low", text="Motion again"
    )

    assert again.outcome == "returned"
    rewritten.fact.refresh_from_db()
    assert rewritten.fact.status == Fact.Status.FORGOTTEN
    assert not _judgement_facts(home).exists()


def test_a_real_finding_about_another_check_leaves_the_judgement(home, judged):
    review_findings.mark_fixed(finding=_raise(home, check_id="battery_low", text="Battery at 5%"))

    assert judged in _judgement_facts(home)


# Thirty days, renewed ---------------------------------------------------------------------


def test_marking_another_one_renews_the_thirty_days(home, judged):
    Fact.objects.filter(pk=judged.pk).update(expires_at=timezone.now() + timedelta(days=2))

    _not_a_problem(home)

    (fact,) = _judgement_facts(home)
    assert "5 of 5" in fact.text
    assert fact.expires_at > timezone.now() + timedelta(days=29)
    assert Judgement.objects.get().fact == fact


def test_the_same_arithmetic_written_again_renews_the_same_fact(home, landing, judged):
    Fact.objects.filter(pk=judged.pk).update(expires_at=timezone.now() + timedelta(days=2))

    judgements.recount(memory=home, check_id=CHECK, subject=landing)

    judged.refresh_from_db()
    assert judged.expires_at > timezone.now() + timedelta(days=29)
    assert _judgement_facts(home).get() == judged


def test_a_judgement_expires_after_thirty_days(home, judged):
    assert judged in Fact.objects.live(now=timezone.now() + timedelta(days=29))
    assert judged not in Fact.objects.live(now=timezone.now() + timedelta(days=31))


# Like any other fact ----------------------------------------------------------------------


def test_a_judgement_is_a_live_fact_and_can_be_forgotten(home, judged, alice):
    assert judged in Fact.objects.for_memory(home).live()

    memory_actions.forget(fact=judged, by=alice)

    assert judged not in Fact.objects.for_memory(home).live()
    judged.refresh_from_db()
    assert judged.status == Fact.Status.FORGOTTEN
