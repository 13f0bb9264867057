"""Rules a person sets with "Not a problem", and how long an answer lasts: only "Not a problem"
is permanent; a fix holds while it stays fixed, and lapses after ninety days."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from knowledge.models import Subject
from review import findings as review_findings
from review.models import Event, Finding, Rule

MOTION = "binary_sensor.landing_motion"
DOOR = "binary_sensor.landing_door"
KITCHEN_MOTION = "binary_sensor.kitchen_motion"


@pytest.fixture
def house(home) -> dict[str, Subject]:
    """A landing with two sensors and a kitchen with one."""
    landing = Subject.objects.create(memory=home, kind="room", name="Landing")
    kitchen = Subject.objects.create(memory=home, kind="room", name="Kitchen")
    return {
        "landing": landing,
        "kitchen": kitchen,
        MOTION: Subject.objects.create(
            memory=home, kind="device", name="Landing motion", entity_id=MOTION, room=landing
        ),
        DOOR: Subject.objects.create(
            memory=home, kind="device", name="Landing door", entity_id=DOOR, room=landing
        ),
        KITCHEN_MOTION: Subject.objects.create(
            memory=home,
            kind="device",
            name="Kitchen motion",
            entity_id=KITCHEN_MOTION,
            room=kitchen,
        ),
    }


def _raise(home, check_id="night_motion", entity_id=MOTION, text=None, **kwargs):
    return review_findings.raise_finding(
        memory=home,
        check_id=check_id,
        entity_id=entity_id,
        severity=kwargs.pop("severity", "medium"),
        text=text or f"{check_id.replace('_', ' ').capitalize()} on {entity_id}",
        **kwargs,
    )


def _finding(home, **kwargs) -> Finding:
    raised = _raise(home, **kwargs)
    assert raised.outcome == "new", raised.message
    return raised.finding


# Not a problem: this check, this sensor -------------------------------------------------------


def test_not_a_problem_writes_a_rule_for_this_check_on_this_sensor(home, house, alice):
    finding = _finding(home)

    rule = review_findings.not_a_problem(finding=finding, by=alice, reason="It's the cat.")

    assert (rule.check_id, rule.scope, rule.entity_id) == ("night_motion", "sensor", MOTION)
    assert rule.subject == house[MOTION]
    assert rule.until is None  # for good
    assert rule.origin == Rule.Origin.NOT_A_PROBLEM and rule.created_by == alice
    assert rule.describe() == "Not raised: “night_motion” on Landing motion"
    finding.refresh_from_db()
    assert finding.state == Finding.State.NOT_A_PROBLEM
    assert finding.reason == "It's the cat."
    assert list(Rule.objects.for_memory(home).active()) == [rule]


def test_the_same_check_on_that_sensor_is_quiet_afterwards(home, house):
    review_findings.not_a_problem(finding=_finding(home))

    again = _raise(home)

    assert again.outcome == "quiet"
    assert again.finding is None
    assert "Not raised" in again.message
    assert not Finding.objects.for_memory(home).open().exists()


def test_a_different_check_on_that_sensor_is_still_raised(home, house):
    review_findings.not_a_problem(finding=_finding(home))

    assert _raise(home, check_id="battery_low").outcome == "new"


def test_the_same_check_on_another_sensor_is_still_raised(home, house):
    review_findings.not_a_problem(finding=_finding(home))

    assert _raise(home, entity_id=KITCHEN_MOTION).outcome == "new"


def test_two_checks_marked_wrong_on_one_sensor_are_two_rules(home, house):
    review_findings.not_a_problem(finding=_finding(home, check_id="night_motion"))
    review_findings.not_a_problem(finding=_finding(home, check_id="battery_low"))

    rules = Rule.objects.for_memory(home).active()
    assert sorted(rules.values_list("check_id", flat=True)) == ["battery_low", "night_motion"]
    assert _raise(home, check_id="night_motion").outcome == "quiet"
    assert _raise(home, check_id="battery_low").outcome == "quiet"
    assert _raise(home, check_id="unavailable").outcome == "new"


def test_a_settled_finding_cannot_be_settled_again(home, house):
    finding = _finding(home)
    review_findings.not_a_problem(finding=finding)

    with pytest.raises(review_findings.Refused, match="already settled"):
        review_findings.not_a_problem(finding=finding)
    assert Rule.objects.count() == 1


# Wider scopes -------------------------------------------------------------------------------


def test_a_device_rule_quiets_every_check_on_that_device_only(home, house):
    review_findings.not_a_problem(finding=_finding(home), scope=Rule.Scope.DEVICE)

    assert _raise(home, check_id="battery_low").outcome == "quiet"
    assert _raise(home, check_id="unavailable").outcome == "quiet"
    assert _raise(home, check_id="battery_low", entity_id=DOOR).outcome == "new"


def test_a_room_rule_quiets_this_check_anywhere_in_the_room_only(home, house):
    rule = review_findings.not_a_problem(
        finding=_finding(home), scope=Rule.Scope.ROOM, confirmed=True
    )

    assert rule.room == house["landing"]
    assert "anywhere in Landing" in rule.describe()
    assert _raise(home, entity_id=DOOR).outcome == "quiet"  # same room, same check
    assert _raise(home, entity_id=DOOR, check_id="battery_low").outcome == "new"
    assert _raise(home, entity_id=KITCHEN_MOTION).outcome == "new"  # another room


def test_an_everywhere_rule_quiets_this_check_on_every_sensor_only(home, house):
    review_findings.not_a_problem(
        finding=_finding(home), scope=Rule.Scope.EVERYWHERE, confirmed=True
    )

    assert _raise(home, entity_id=KITCHEN_MOTION).outcome == "quiet"
    assert _raise(home, entity_id=DOOR).outcome == "quiet"
    assert _raise(home, entity_id=DOOR, check_id="battery_low").outcome == "new"


@pytest.mark.parametrize("scope", [Rule.Scope.ROOM, Rule.Scope.EVERYWHERE])
def test_a_wide_rule_is_refused_until_it_is_confirmed(home, house, scope):
    finding = _finding(home)

    with pytest.raises(review_findings.Refused, match="confirm it"):
        review_findings.not_a_problem(finding=finding, scope=scope)

    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN  # nothing was settled
    assert not Rule.objects.exists()


def test_a_room_rule_needs_something_in_a_known_room(home, house):
    Subject.objects.create(memory=home, kind="device", name="Porch light", entity_id="light.porch")
    finding = _finding(home, entity_id="light.porch", check_id="left_on")

    with pytest.raises(review_findings.Refused, match="known room"):
        review_findings.not_a_problem(finding=finding, scope=Rule.Scope.ROOM, confirmed=True)

    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN  # the refusal rolled the settling back
    assert not Rule.objects.exists()


def test_an_unknown_scope_is_refused(home, house):
    with pytest.raises(ValidationError, match="scope must be"):
        review_findings.not_a_problem(finding=_finding(home), scope="street")


# For a while, not for good -----------------------------------------------------------------


def test_a_rule_for_a_month_stops_covering_after_thirty_days(home, house):
    rule = review_findings.not_a_problem(finding=_finding(home), until="month")

    assert timezone.now() + timedelta(days=29) < rule.until < timezone.now() + timedelta(days=31)
    assert rule in Rule.objects.active(now=timezone.now() + timedelta(days=29))
    assert rule not in Rule.objects.active(now=timezone.now() + timedelta(days=31))
    assert _raise(home).outcome == "quiet"

    Rule.objects.filter(pk=rule.pk).update(until=timezone.now() - timedelta(minutes=1))

    assert _raise(home).outcome == "new"


def test_a_rule_until_a_date_in_the_past_is_refused(home, house):
    with pytest.raises(ValidationError, match="future"):
        review_findings.not_a_problem(
            finding=_finding(home), until=timezone.now() - timedelta(days=1)
        )


def test_removing_a_rule_lets_the_check_raise_it_again(home, house):
    finding = _finding(home)
    rule = review_findings.not_a_problem(finding=finding)

    review_findings.remove_rule(rule=rule)

    assert not Rule.objects.for_memory(home).active().exists()
    finding.refresh_from_db()
    assert finding.state == Finding.State.LAPSED
    again = _raise(home)
    assert again.outcome == "new"
    assert again.finding != finding


# Fixed: quiet only while it stays fixed -------------------------------------------------------


@pytest.mark.parametrize("how", list(Finding.Settled))
def test_a_fix_suppresses_the_finding_for_ninety_days(home, house, how):
    finding = _finding(home)

    fixed = review_findings.mark_fixed(finding=finding, how=how)

    assert fixed.state == Finding.State.SUPPRESSED
    assert fixed.settled_how == how
    low = timezone.now() + timedelta(days=89)
    assert low < fixed.suppressed_until < low + timedelta(days=2)
    assert not Rule.objects.exists()  # only "Not a problem" writes a rule


def test_raised_again_while_fixed_it_is_open_again_saying_how_long_it_stayed_away(home, house):
    finding = _finding(home)
    review_findings.mark_fixed(finding=finding)
    Finding.objects.filter(pk=finding.pk).update(
        settled_at=timezone.now() - timedelta(days=12, hours=3)
    )

    again = _raise(home)

    assert again.outcome == "returned"
    assert again.finding == finding
    assert again.message == "Raised again: back after 12 days."
    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN
    assert finding.returned_after == "back after 12 days"
    assert finding.times_raised == 2
    assert finding.settled_at is None and finding.suppressed_until is None
    event = Event.objects.for_memory(home).order_by("-pk").first()
    assert event.text.endswith("(back after 12 days)")
    assert event.data["returned"] is True


def test_back_within_a_day_says_hours(home, house):
    finding = _finding(home)
    review_findings.mark_fixed(finding=finding)
    Finding.objects.filter(pk=finding.pk).update(settled_at=timezone.now() - timedelta(hours=5))

    assert _raise(home).message == "Raised again: back after 5 hours."


def test_a_fix_that_held_ninety_days_lapses(home, house):
    finding = _finding(home)
    review_findings.mark_fixed(finding=finding)

    assert review_findings.lapse_suppressions(now=timezone.now() + timedelta(days=89)) == 0
    assert review_findings.lapse_suppressions(now=timezone.now() + timedelta(days=91)) == 1

    finding.refresh_from_db()
    assert finding.state == Finding.State.LAPSED
    again = _raise(home)  # a new problem now, not a return
    assert again.outcome == "new"
    assert again.finding != finding


def test_lapsing_leaves_not_a_problem_alone(home, house):
    finding = _finding(home)
    review_findings.not_a_problem(finding=finding)

    review_findings.lapse_suppressions(now=timezone.now() + timedelta(days=365))

    finding.refresh_from_db()
    assert finding.state == Finding.State.NOT_A_PROBLEM
    assert _raise(home).outcome == "quiet"


def test_an_open_finding_raised_again_is_counted_not_repeated(home, house):
    finding = _finding(home)

    again = _raise(home, text="Night motion on the landing, 03:12")

    assert again.outcome == "again"
    assert again.finding == finding
    finding.refresh_from_db()
    assert finding.times_raised == 2
    assert finding.text == "Night motion on the landing, 03:12"
    assert Finding.objects.count() == 1


# Protected: never quieter -----------------------------------------------------------------


@pytest.fixture
def leak_sensor(home, house) -> str:
    Subject.objects.create(
        memory=home,
        kind="device",
        name="Kitchen sink leak",
        entity_id="binary_sensor.sink_leak",
        room=house["kitchen"],
    )
    return "binary_sensor.sink_leak"


@pytest.mark.parametrize(
    "check_id", ["leak", "smoke", "gas", "freeze", "water_leak", "smoke-detected", "pipe.freeze"]
)
def test_a_protected_finding_is_raised_even_under_a_rule(home, leak_sensor, check_id):
    finding = _finding(
        home, check_id=check_id, entity_id=leak_sensor, severity="high", text="Sensor tripped"
    )
    assert finding.protected

    review_findings.not_a_problem(finding=finding, reason="Test button pressed")

    again = _raise(
        home, check_id=check_id, entity_id=leak_sensor, severity="high", text="Sensor tripped"
    )
    assert again.outcome == "new"
    assert again.finding.protected


def test_a_protected_finding_is_raised_even_under_a_device_rule(home, leak_sensor):
    review_findings.not_a_problem(
        finding=_finding(home, check_id="humidity_high", entity_id=leak_sensor),
        scope=Rule.Scope.DEVICE,
    )
    assert _raise(home, check_id="humidity_high", entity_id=leak_sensor).outcome == "quiet"

    assert _raise(home, check_id="leak", entity_id=leak_sensor).outcome == "new"


def test_a_protected_finding_is_recognised_from_its_words(home, leak_sensor):
    finding = _finding(
        home, check_id="moisture", entity_id=leak_sensor, text="Water under the kitchen sink"
    )

    assert finding.protected


@pytest.mark.parametrize(
    ("scope", "confirmed"),
    [(Rule.Scope.DEVICE, False), (Rule.Scope.ROOM, True), (Rule.Scope.EVERYWHERE, True)],
)
def test_a_protected_finding_refuses_wider_rules(home, leak_sensor, scope, confirmed):
    finding = _finding(home, check_id="leak", entity_id=leak_sensor, severity="high")

    with pytest.raises(review_findings.Refused, match="never silenced beyond one sensor"):
        review_findings.not_a_problem(finding=finding, scope=scope, confirmed=confirmed)

    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN
    assert not Rule.objects.exists()


def test_a_finding_marked_protected_by_its_check_is_never_quiet(home, house):
    finding = _finding(home, check_id="co_alarm_offline", protected=True)
    review_findings.not_a_problem(finding=finding)

    assert _raise(home, check_id="co_alarm_offline", protected=True).outcome == "new"
