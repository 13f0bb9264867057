"""Two subjects that are one thing, merged: facts, names, rules, findings and guesses follow."""

import pytest

from knowledge import actions as knowledge_actions
from knowledge import subjects as knowledge_subjects
from knowledge.models import Fact, Memory, Subject
from memory import actions as memory_actions
from memory.models import Origin
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses
from review import merging
from review.models import Finding, Guess, Judgement, Rule

LAMP = "light.office_lamp"


@pytest.fixture
def office(home) -> Subject:
    return Subject.objects.create(memory=home, kind="room", name="Office")


@pytest.fixture
def lamp(home, office) -> Subject:
    return Subject.objects.create(
        memory=home, kind="device", name="Office lamp", entity_id=LAMP, room=office
    )


@pytest.fixture
def beacon(home) -> Subject:
    """The same lamp, made again from a nickname before anyone knew."""
    return Subject.objects.create(memory=home, kind="device", name="The beacon", aliases=["bob"])


def _teach(home, text, subject) -> Fact:
    return memory_actions.learn(
        Statement.typed(memory=home, text=text, origin=Origin.TYPED, subjects=[subject.pk])
    ).fact


def test_the_merged_subjects_facts_are_about_the_kept_one(home, lamp, beacon):
    timer = _teach(home, "It is on a timer until 23:00.", beacon)
    both = _teach(home, "It flickers when the heater runs.", beacon)
    both.subjects.add(lamp)

    merged = merging.merge_subjects(keep=lamp, merged=beacon)

    assert set(Fact.objects.filter(subjects=lamp)) == {timer, both}
    assert list(both.subjects.all()) == [lamp]
    assert not Subject.objects.filter(pk=beacon.pk).exists()
    assert merged.message == (
        "Merged “The beacon” into “Office lamp”: 2 facts followed; it is also called "
        "“the beacon”, “bob” now."
    )


def test_the_merged_subjects_names_find_the_kept_one(home, lamp, beacon):
    merging.merge_subjects(keep=lamp, merged=beacon)

    assert knowledge_subjects.resolve(home, ["the beacon", "bob", LAMP]) == [lamp]
    assert knowledge_subjects.mentioned_in(home, "Is the beacon on?") == [lamp]


def test_an_entity_id_moves_to_a_subject_that_had_none(home, office):
    nickname = Subject.objects.create(memory=home, kind="device", name="Desk light")
    entity = Subject.objects.create(
        memory=home, kind="device", name="light.desk", entity_id="light.desk", room=office
    )

    merging.merge_subjects(keep=nickname, merged=entity)

    nickname.refresh_from_db()
    assert (nickname.entity_id, nickname.room) == ("light.desk", office)
    assert nickname.aliases == []  # its name was its entity id: nothing new to call it


def test_rules_findings_and_guesses_follow(home, lamp, beacon):
    finding = review_findings.raise_finding(
        memory=home, check_id="left_on", text="The beacon was left on", severity="low"
    ).finding
    Finding.objects.filter(pk=finding.pk).update(subject=beacon)
    finding.refresh_from_db()
    rule = review_findings.not_a_problem(finding=finding)
    guess = review_guesses.propose_guess(
        memory=home, text="The beacon is a night light", subject=beacon
    )

    merged = merging.merge_subjects(keep=lamp, merged=beacon)

    rule.refresh_from_db()
    assert rule.subject == lamp
    assert Finding.objects.get(pk=finding.pk).subject == lamp
    assert Guess.objects.get(pk=guess.guess.pk).subject == lamp
    assert merged.message.startswith("Merged “The beacon” into “Office lamp”: 0 facts and 1 rule")


def test_a_rule_about_a_room_follows_the_room(home, office):
    study = Subject.objects.create(memory=home, kind="room", name="Study")
    rule = Rule.objects.create(
        memory=home, check_id="motion", scope=Rule.Scope.ROOM, room=study, origin="correction"
    )
    desk = Subject.objects.create(memory=home, kind="device", name="Desk", room=study)

    merging.merge_subjects(keep=office, merged=study)

    rule.refresh_from_db()
    desk.refresh_from_db()
    assert (rule.room, desk.room) == (office, office)


def _marked_not_a_problem(home, subject, times: int) -> None:
    for n in range(times):
        finding = Finding.objects.create(
            memory=home, check_id="left_on", subject=subject, severity="low", text=f"On {n}"
        )
        review_findings.not_a_problem(finding=finding, reason="It's the night light")


def _judgement_facts(home) -> list[str]:
    live = Fact.objects.for_memory(home).live().filter(kind=Fact.Kind.JUDGEMENT)
    return list(live.values_list("text", flat=True))


def test_judgements_are_worked_out_again_over_the_findings_both_share(home, lamp, beacon):
    _marked_not_a_problem(home, beacon, 3)
    _marked_not_a_problem(home, lamp, 1)
    assert _judgement_facts(home) == [
        "Left on on the beacon is the night light — 3 of 3 it raised were marked not a problem."
    ]

    merging.merge_subjects(keep=lamp, merged=beacon)

    judgement = Judgement.objects.get()
    assert (judgement.subject, judgement.raised, judgement.marked_not_a_problem) == (lamp, 4, 4)
    assert _judgement_facts(home) == [
        "Left on on office lamp is the night light — 4 of 4 it raised were marked not a problem."
    ]


def test_findings_that_move_can_make_a_judgement_neither_subject_had(home, lamp, beacon):
    _marked_not_a_problem(home, beacon, 2)
    _marked_not_a_problem(home, lamp, 1)
    assert not Judgement.objects.exists()  # three are needed

    merging.merge_subjects(keep=lamp, merged=beacon)

    judgement = Judgement.objects.get()
    assert (judgement.subject, judgement.raised) == (lamp, 3)


def test_a_subject_merged_with_itself_or_another_memory_is_refused(home, lamp):
    elsewhere = Memory.objects.create(slug="cabin", name="Cabin")
    cabin_lamp = Subject.objects.create(memory=elsewhere, kind="device", name="Office lamp")

    with pytest.raises(knowledge_actions.CannotMerge, match="with itself"):
        merging.merge_subjects(keep=lamp, merged=lamp)
    with pytest.raises(knowledge_actions.CannotMerge, match="different memories"):
        merging.merge_subjects(keep=lamp, merged=cabin_lamp)
    assert Subject.objects.filter(pk=cabin_lamp.pk).exists()


def test_facts_rest_only_while_one_of_their_subjects_is_gone(home, lamp, beacon):
    fact = _teach(home, "It is on a timer until 23:00.", beacon)
    knowledge_actions.set_subject_presence(subject=beacon, present=False)
    fact.refresh_from_db()
    assert fact.subject_removed

    merging.merge_subjects(keep=lamp, merged=beacon)

    fact.refresh_from_db()
    assert not fact.subject_removed
