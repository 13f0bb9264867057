"""Comparing two statements about a home: what counts as the same fact, a contradiction, a
refinement. Which section of the memory document a fact belongs in is test_kinds.py. No
database."""

from __future__ import annotations

import pytest

from knowledge.statements import (
    VERDICTS,
    Quantity,
    compare,
    content_words,
    is_negated,
    normalise,
    numbers,
)

OFFICE = "“The office” means the upstairs back bedroom, not the study downstairs."
SARAH = (
    "Sarah is a light sleeper. Nothing in the hallway should go above 15% brightness between "
    "23:00 and 06:00."
)
HEATING = (
    "Heating is an 8 kW air-source heat pump on weather compensation. It is not a boiler, so "
    "“boost the heating” means raising the flow temperature."
)
FRIDGE = (
    "The garage fridge is meant to run 24/7. Its draw looking abnormal at 3 am is the defrost "
    "cycle, not a fault."
)
RENAME = (
    "Never rename an entity_id without asking — several are referenced in a Node-RED flow I "
    "cannot see."
)


# --- normalise, content_words, numbers, is_negated ------------------------------------------


def test_normalise_ignores_case_typography_spacing_and_the_final_full_stop():
    assert normalise("  Sarah’s  lamp —\tthe “big” one. ") == 'sarah\'s lamp - the "big" one'
    assert normalise("Sarah is a light sleeper.") == normalise("sarah is a light sleeper")


def test_content_words_leave_out_stopwords_and_fold_forms_of_one_word():
    assert content_words("Sarah sleeps lightly") == content_words("Sarah is a light sleeper")
    assert content_words("The lamps were moved") == content_words("move the lamp")
    assert "the" not in content_words("The lamp")


def test_content_words_keep_numbers_with_their_units_and_entity_ids_whole():
    words = content_words("Keep light.office_lamp at 15% from 23:00, on the 8kW circuit at 19")
    assert {"light.office_lamp", "15%", "23:00", "8kw", "19"} <= words


def test_the_same_quantity_written_differently_is_one_content_word():
    assert content_words("kept at 19 degrees") == content_words("kept at 19°C")
    assert content_words("an 8 kW pump") == content_words("an 8kW pump")


def test_numbers_read_times_percentages_and_units_with_how_they_were_written():
    found = numbers("Dim to 15% between 11pm and 06:00; the pump is 8 kW")
    assert found == (
        Quantity("15", "%", ""),
        Quantity("23:00", "time", ""),
        Quantity("06:00", "time", ""),
        Quantity("8", "kw", ""),
    )
    assert [q.text for q in found] == ["15%", "11pm", "06:00", "8 kw"]


def test_a_plain_word_is_not_mistaken_for_a_unit():
    assert numbers("Bins go out 2 a week") == (Quantity("2", "", ""),)


@pytest.mark.parametrize(
    "text",
    [
        "The hall light is not on at night",
        "Never rename an entity_id",
        "The garage door isn't locked",
        "Sarah doesn't like bright lights",
        "Don't announce the post",
        "There is no smart plug on the fridge",
    ],
)
def test_negations_are_seen_in_all_their_forms(text):
    assert is_negated(text)


def test_off_is_a_state_and_not_a_negation():
    assert not is_negated("The garage freezer is off in winter")
    assert not is_negated("The hall light is on at night")


# --- compare: same -----------------------------------------------------------------------------


def test_near_identical_wording_is_the_same_statement():
    result = compare("Sarah is a light sleeper.", "sarah is a light sleeper")
    assert result.verdict == "same"
    assert result.similarity == 1.0


def test_a_paraphrase_that_shares_its_stems_is_the_same_statement():
    assert compare("Sarah is a light sleeper", "Sarah sleeps lightly").verdict == "same"


def test_a_statement_already_said_as_part_of_a_longer_one_is_the_same():
    assert compare(SARAH, "Sarah is a light sleeper").verdict == "same"
    assert compare(OFFICE, "The office means the upstairs back bedroom").verdict == "same"


@pytest.mark.parametrize(
    ("statement", "question"),
    [
        (
            "The garage fridge is meant to run 24/7",
            "Is the fridge in the garage supposed to be running around the clock?",
        ),
        ("Sarah is a light sleeper", "Is Sarah a light sleeper?"),
        ("The back gate is locked at night", "Is the back gate locked at night?"),
        ("The garden shed is locked at night", "Is the garden shed locked at night?"),
        ("The boiler has been serviced this year", "Has the boiler been serviced this year?"),
        ("The hall light switches on at 06:10", "Does the hall light switch on at 06:10?"),
        ("The loft is warm", "Is the loft warm?"),
        (
            "The garage fridge is meant to run 24/7",
            "The garage fridge is meant to run 24/7, right?",
        ),
        ("The hall light is on at night", "The hall light is on at night, isn't it?"),
    ],
)
def test_a_question_is_compared_as_the_statement_it_asks(statement, question):
    result = compare(statement, question)
    assert result.verdict == "same", result.reason


def test_a_question_about_another_value_is_not_the_same_statement():
    assert compare("The loft is warm", "Is the loft cold?").verdict != "same"
    assert (
        compare(
            "The hall light switches on at 06:10", "Does the hall light switch on at 07:10?"
        ).verdict
        == "contradiction"
    )
    assert compare("Sarah is a light sleeper", "Is Tom a light sleeper?").verdict != "same"


def test_a_denied_clause_does_not_count_as_already_said():
    result = compare("The office is upstairs, not downstairs", "The office is downstairs")
    assert result.verdict != "same"


# --- compare: contradiction --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The hall light is on at night", "The hall light is not on at night"),
        ("The hall light is not on at night", "The hall light is on at night"),
        ("Never rename an entity_id without asking", "Rename entity ids without asking"),
        ("Don't turn on the heating", "Turn on the heating"),
        ("Sarah is a light sleeper", "Sarah isn't a light sleeper"),
        (SARAH, "Sarah is not a light sleeper"),
    ],
)
def test_statements_that_differ_by_a_not_are_a_contradiction_never_the_same(old, new):
    result = compare(old, new)
    assert result.verdict == "contradiction"
    assert result.reason.startswith("differs by a")


def test_a_new_number_for_the_same_subject_contradicts_the_old_one():
    result = compare("The bedroom is kept at 19 degrees", "The bedroom is kept at 21 degrees")
    assert result.verdict == "contradiction"
    assert result.reason == "same subject, 19 degrees → 21 degrees"


def test_a_new_time_in_a_longer_statement_contradicts_the_old_one():
    result = compare(SARAH, SARAH.replace("23:00", "22:30"))
    assert result.verdict == "contradiction"
    assert "23:00 → 22:30" in result.reason


def test_a_different_number_for_a_different_room_is_not_a_contradiction():
    result = compare("The kitchen is kept at 19 degrees", "The bedroom is kept at 21 degrees")
    assert result.verdict == "related"


@pytest.mark.parametrize(
    ("old", "new", "cue"),
    [
        ("Sarah's mother lives with us", "Sarah's mother has moved out", "moved"),
        ("The garage fridge is meant to run 24/7", "The garage fridge was sold", "sold"),
        ("Tom works from home", "Tom no longer works from home", "no longer"),
        ("Tom works in the office on weekdays", "Tom now works in the garage on weekdays", "now"),
        ("The Nest thermostat is in the hall", "The Nest thermostat was replaced by a Tado", None),
    ],
)
def test_a_state_change_about_the_same_subject_is_a_contradiction(old, new, cue):
    result = compare(old, new)
    assert result.verdict == "contradiction"
    assert result.reason.startswith("state change")
    if cue:
        assert result.reason == f"state change: '{cue}'"


def test_a_state_change_about_something_else_is_only_related():
    assert compare("The office is upstairs", "The office lamp has been replaced").verdict == (
        "related"
    )


def test_on_and_off_are_opposite_states_of_the_same_thing():
    result = compare("The garage freezer is off in winter", "The garage freezer is on in winter")
    assert result.verdict == "contradiction"
    assert result.reason == "opposite state: 'off' → 'on'"


# --- compare: refinement, related, novel -------------------------------------------------------


def test_a_statement_that_keeps_the_old_words_and_adds_more_is_a_refinement():
    old = "Heating is an 8 kW air-source heat pump on weather compensation"
    result = compare(old, HEATING)
    assert result.verdict == "refinement"
    assert result.reason.startswith("adds ")


def test_adding_a_not_in_a_new_clause_is_a_refinement_not_a_contradiction():
    result = compare("The office means the upstairs back bedroom", OFFICE)
    assert result.verdict == "refinement"


def test_statements_sharing_a_subject_but_saying_different_things_are_related():
    result = compare("Sarah is a light sleeper", "Sarah works from home on Fridays")
    assert result.verdict == "related"
    assert "sarah" in result.reason.casefold()


def test_statements_with_nothing_in_common_are_novel():
    result = compare("Sarah is a light sleeper", "The garage freezer is off in winter")
    assert result.verdict == "novel"
    assert result.similarity == 0.0


def test_every_comparison_is_repeatable_and_within_its_documented_range():
    pairs = [(OFFICE, SARAH), (HEATING, FRIDGE), (RENAME, RENAME), (SARAH, SARAH + " Always.")]
    for old, new in pairs:
        first, second = compare(old, new), compare(old, new)
        assert first == second
        assert first.verdict in VERDICTS
        assert 0.0 <= first.similarity <= 1.0
        assert first.reason


# What only looks like a change --------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # what keeps happening, whenever something else does
        (
            "Grandad calls the landing lamp the lighthouse.",
            "The landing lamp drops off the network when the smoke alarm is tested.",
        ),
        (
            "The kitchen thermostat controls the underfloor heating.",
            "The underfloor heating lowers its flow temperature as the kitchen warms up.",
        ),
        (
            "The back door camera records to the NAS under the stairs.",
            "The back door camera keeps dropping off for a few seconds at dawn.",
        ),
        # a comparison
        (
            "The greenhouse heater is set to 12 degrees all winter.",
            "The greenhouse heater's dial reads two degrees lower than the air really is.",
        ),
        # a change in a later clause, of something else
        (
            "The mesh satellite for the garden office sits on the kitchen windowsill.",
            "The kitchen windowsill gets full sun in the afternoon; the basil plants were moved.",
        ),
    ],
)
def test_what_keeps_happening_or_compares_is_not_a_change_of_what_was_said(old, new):
    judged = compare(old, new)

    assert judged.verdict not in ("contradiction", "conflict"), judged.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a possessive names the subject: "charger's" is not the verb "charge"
        (
            "The electric van charger is on the off-peak rate from 00:00 to 07:00.",
            "The electric van charger's off-peak rate now runs from 01:00 to 06:00.",
        ),
        # what the subject was doing, moved
        (
            "Dad's brother Raj is staying over on the 12th for two nights in the study.",
            "Raj's stay moved to the 19th.",
        ),
    ],
)
def test_a_change_of_what_a_subject_holds_or_does_replaces_it(old, new):
    judged = compare(old, new)

    assert judged.verdict == "contradiction", judged.reason
