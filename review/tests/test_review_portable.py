"""The learned home is portable: findings, the rules Not a problem made, the answered guesses and
brain's judgements travel in the export and fold into another memory, where the checks you told
"not here" stay quiet. Importing twice changes nothing; a bad entry imports nothing."""

import copy
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from brain.portable import ImportRejected
from knowledge.models import Fact, Memory, Subject
from knowledge.read_layer import SYSTEM
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import Finding, Guess, Judgement, Rule
from surfaces import portable

HALL = "binary_sensor.hall_motion"
LOFT = "sensor.loft_temperature"
FREEZER = "The garage freezer is switched off in winter"
FRIDGE = "The garage fridge is meant to run 24/7"


@pytest.fixture
def minilm(settings):
    """Meaning, not just words: the shipped MiniLM model compares the guesses."""
    settings.BRAIN_EMBEDDER = "minilm"


def _house(memory: Memory, *, loft: bool = True) -> None:
    hallway = Subject.objects.create(memory=memory, kind=Subject.Kind.ROOM, name="Hallway")
    Subject.objects.create(
        memory=memory, kind=Subject.Kind.DEVICE, name="Hall motion", entity_id=HALL, room=hallway
    )
    if loft:
        Subject.objects.create(
            memory=memory, kind=Subject.Kind.DEVICE, name="Loft temperature", entity_id=LOFT
        )


def _raise(memory: Memory, check: str, entity_id: str = HALL, severity: str = "low", text=""):
    return review_findings.raise_finding(
        memory=memory,
        check_id=check,
        entity_id=entity_id,
        severity=severity,
        text=text or f"{check} on {entity_id}",
    )


@pytest.fixture
def home(db, alice) -> Memory:
    """Night motion on the hall landing marked not a problem three times (a judgement and a rule
    in force), the loft told "not here" for a season, the hall sensor fixed, a high finding
    open, one guess confirmed, one rejected and one still open."""
    home = Memory.objects.default()
    _house(home)
    for night in range(3):
        finding = _raise(home, "night_motion", text=f"Motion on the hall landing, night {night}")
        rule = review_findings.not_a_problem(finding=finding.finding, reason="the cat", by=alice)
        if night < 2:
            review_findings.remove_rule(rule=rule)
    loft = _raise(home, "too_warm", LOFT, "medium", "The loft is 29°C").finding
    review_findings.not_a_problem(finding=loft, until="season", reason="it's a loft")
    review_findings.mark_fixed(
        finding=_raise(home, "offline", severity="medium").finding, how="got_it"
    )
    _raise(home, "battery_low", severity="high", text="The hall sensor battery is at 4%")
    for text, answer in ((FRIDGE, "yes"), (FREEZER, "no, it's on all year")):
        guess = review_guesses.propose_guess(memory=home, text=text).guess
        review_guesses.answer_guess(guess=guess, answer=answer, by=alice)
    review_guesses.propose_guess(memory=home, text="Guests use the loft")
    assert Judgement.objects.filter(memory=home).count() == 1
    return home


@pytest.fixture
def other(db) -> Memory:
    """A new install that knows the hallway, not yet the loft."""
    other = Memory.objects.create(slug="other", name="Other")
    _house(other, loft=False)
    return other


def _fold(source: Memory, target: Memory) -> list[str]:
    return portable.import_memory(
        target, portable.parse(portable.export_json(source, reader=SYSTEM))
    )


def _findings(memory: Memory) -> list[tuple]:
    return sorted(
        Finding.objects.for_memory(memory).values_list(
            "check_id", "entity_id", "severity", "text", "state", "settled_how", "times_raised"
        )
    )


def _rules(memory: Memory) -> list[tuple]:
    return sorted(
        (r.check_id, r.scope, r.entity_id, r.reason, r.until, r.removed_at is None)
        for r in Rule.objects.for_memory(memory)
    )


def _everything(memory: Memory) -> dict:
    return {
        "findings": _findings(memory),
        "rules": _rules(memory),
        "guesses": sorted(
            Guess.objects.for_memory(memory).values_list("text", "state", "reason", "embedder")
        ),
        "judgements": list(
            Judgement.objects.filter(memory=memory).values_list(
                "check_id", "subject__entity_id", "raised", "marked_not_a_problem"
            )
        ),
    }


def test_the_export_carries_findings_rules_answered_guesses_and_judgements(home):
    data = portable.export_memory(home, reader=SYSTEM)

    assert len(data["findings"]) == 6
    battery = next(f for f in data["findings"] if f["check"] == "battery_low")
    fields = ("entity_id", "severity", "state", "settled_how", "times_raised")
    assert [battery[k] for k in fields] == [HALL, "high", "open", "", 1]
    assert {r["check"]: r["scope"] for r in data["rules"] if r["removed_at"] is None} == {
        "night_motion": "sensor",
        "too_warm": "sensor",
    }
    assert next(r for r in data["rules"] if r["check"] == "too_warm")["until"] is not None
    assert next(r for r in data["rules"] if r["check"] == "night_motion")["room"] == "Hallway"
    assert sorted((g["text"], g["state"], g["reason"]) for g in data["guesses"]) == [
        (FREEZER, "rejected", "it's on all year"),
        (FRIDGE, "confirmed", ""),
    ]
    [judgement] = data["judgements"]
    assert (judgement["check"], judgement["entity_id"]) == ("night_motion", HALL)
    assert (judgement["raised"], judgement["marked_not_a_problem"]) == (3, 3)
    assert "3 of 3" in judgement["text"]


def test_everything_folds_into_another_memory_with_references_resolved_there(home, other):
    report = _fold(home, other)

    assert "Findings: 6 added, 0 already here." in report
    assert "Rules: 4 added, 0 already here." in report
    assert "Answered guesses: 2 added, 0 already here." in report
    assert "Judgements: 1 added, 0 already here." in report
    assert _findings(other) == _findings(home)
    assert _rules(other) == _rules(home)
    hall = Subject.objects.get(memory=other, entity_id=HALL)
    assert all(f.subject == hall for f in Finding.objects.for_memory(other).filter(entity_id=HALL))
    loft = Finding.objects.for_memory(other).get(check_id="too_warm").subject
    assert (loft.memory, loft.entity_id) == (other, LOFT)  # the subjects section brought it
    rule = Rule.objects.for_memory(other).active().get(check_id="night_motion")
    assert (rule.subject, rule.room.name, rule.finding.memory) == (hall, "Hallway", other)
    judgement = Judgement.objects.get(memory=other)
    assert (judgement.subject, judgement.raised, judgement.marked_not_a_problem) == (hall, 3, 3)
    assert (judgement.fact.memory, judgement.fact.kind) == (other, "judgement")
    assert not Guess.objects.for_memory(other).open().exists()  # only answered ones travel
    assert Finding.objects.for_memory(home).count() == 6  # the source is untouched


def test_an_imported_rule_keeps_the_check_quiet_on_the_new_install(home, other):
    _fold(home, other)

    raised = _raise(other, "night_motion", text="Motion on the hall landing again")

    assert raised.outcome == "quiet"
    assert raised.message.startswith("Not raised: rule #")


def test_a_rule_about_an_entity_the_new_install_lacks_stays_quiet_once_it_appears(home, other):
    Subject.objects.filter(memory=home, entity_id=LOFT).delete()  # the rule outlived the entity
    _fold(home, other)
    rule = Rule.objects.for_memory(other).get(check_id="too_warm")
    assert (rule.subject, rule.entity_id) == (None, LOFT)

    Subject.objects.create(memory=other, kind="device", name="Loft temperature", entity_id=LOFT)
    raised = _raise(other, "too_warm", LOFT, "medium", "The loft is 30°C")

    assert raised.outcome == "quiet"


def test_checks_no_rule_covers_are_raised_as_usual_on_the_new_install(home, other):
    _fold(home, other)

    assert _raise(other, "battery_low", severity="high").outcome == "again"
    assert _raise(other, "door_open", text="The front door is open").outcome == "new"


def test_a_rewording_of_an_imported_rejected_guess_is_never_asked(home, other, minilm):
    _fold(home, other)
    imported = Guess.objects.for_memory(other).get(text=FREEZER)
    assert imported.embedder == "minilm-int8-v1"
    assert imported.embedding is not None

    again = review_guesses.propose_guess(
        memory=other, text="In winter the freezer in the garage is turned off"
    )

    assert again.guess is None
    assert "already rejected" in again.message
    assert review_guesses.propose_guess(memory=other, text="The loft is used by guests").guess


def test_importing_the_same_file_twice_changes_nothing(home, other):
    raw = portable.export_json(home, reader=SYSTEM)
    portable.import_memory(other, portable.parse(raw))
    before = _everything(other)

    report = portable.import_memory(other, portable.parse(raw))

    assert _everything(other) == before
    assert "Findings: 0 added, 6 already here." in report
    assert "Rules: 0 added, 4 already here." in report
    assert "Answered guesses: 0 added, 2 already here." in report
    assert "Judgements: 0 added, 1 already here." in report


def test_importing_a_memory_into_itself_changes_nothing(home):
    before = _everything(home)

    _fold(home, home)

    assert _everything(home) == before


def test_entries_already_here_win(home, other):
    mine = _raise(other, "battery_low", severity="low", text="Battery at 30%").finding

    report = _fold(home, other)

    assert "Findings: 5 added, 1 already here (1 open here already)." in report
    [open_one] = Finding.objects.for_memory(other).filter(check_id="battery_low")
    assert (open_one.pk, open_one.text) == (mine.pk, "Battery at 30%")


@pytest.mark.parametrize(
    ("section", "spoil", "message"),
    [
        ("findings", {"severity": "urgent"}, "findings entry 2 has an unknown severity 'urgent'"),
        ("findings", {"text": ""}, 'findings entry 2 has an empty "text"'),
        ("findings", {"times_raised": 0}, 'findings entry 2 has an invalid "times_raised"'),
        ("findings", {"last_raised_at": "yesterday"}, 'findings entry 2 has an invalid "last_'),
        ("findings", {"uid": "not-a-uid"}, "findings entry 2 has an invalid uid"),
        ("rules", {"scope": "street"}, "rules entry 2 has an unknown scope 'street'"),
        ("rules", {"origin": "a whim"}, "rules entry 2 has an unknown origin"),
        ("rules", {"until": "2031-02-30T00:00:00"}, 'rules entry 2 has an invalid "until"'),
        ("rules", {"reason": "x" * 301}, 'rules entry 2 has an invalid "reason"'),
        ("guesses", {"state": "open"}, "guesses entry 2 is 'open'; only confirmed or rejected"),
        ("judgements", {"raised": 2}, "judgements entry 1 has invalid counts"),
    ],
)
def test_a_bad_entry_is_refused_naming_it_and_nothing_is_written(
    home, other, section, spoil, message
):
    data = copy.deepcopy(portable.export_memory(home, reader=SYSTEM))
    entry = 0 if section == "judgements" else 1
    data[section][entry].update(spoil)
    before = _everything(other)
    facts = Fact.objects.for_memory(other).count()

    with pytest.raises(ImportRejected) as refused:
        portable.import_memory(other, portable.parse(json.dumps(data)))

    assert message in str(refused.value)
    assert _everything(other) == before
    assert Fact.objects.for_memory(other).count() == facts


def test_a_repeated_uid_is_refused(home, other):
    data = portable.export_memory(home, reader=SYSTEM)
    data["rules"][1]["uid"] = data["rules"][0]["uid"]

    with pytest.raises(ImportRejected, match="rules entry 2 repeats the uid"):
        portable.parse(json.dumps(data))


def test_an_expired_rule_travels_but_keeps_nothing_quiet(home, other):
    Rule.objects.for_memory(home).filter(check_id="night_motion").update(
        until=timezone.now() - timedelta(days=1)
    )

    _fold(home, other)

    assert _raise(other, "night_motion").outcome == "new"
