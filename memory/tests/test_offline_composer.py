"""The offline composer: filing queued facts into the memory document by rule, keeping what a
person wrote, enforcing the size cap and writing the voice distillate. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.composers.base import VOICE_MAX_BYTES, Candidate, Composer, Composition, Request
from memory.composers.offline import OfflineComposer, distil_voice

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

SEED = {
    "Rooms": "“The office” means the upstairs back bedroom, not the study downstairs.",
    "People": (
        "Sarah is a light sleeper. Nothing in the hallway should go above 15% brightness "
        "between 23:00 and 06:00."
    ),
    "House": (
        "Heating is an 8 kW air-source heat pump on weather compensation. It is not a boiler, "
        "so “boost the heating” means raising the flow temperature."
    ),
    "Devices": (
        "The garage fridge is meant to run 24/7. Its draw looking abnormal at 3 am is the "
        "defrost cycle, not a fault."
    ),
    "Rules": (
        "Never rename an entity_id without asking — several are referenced in a Node-RED flow "
        "I cannot see."
    ),
}

TEMPLATE = (
    "# Memory\n\n## House\n\n## People\n\n## Rooms\n\n## Devices\n\n## Preferences\n\n## Routines\n"
)


def fact(
    text: str, minute: int = 0, *, origin: str = "chat", confidence: str = "high"
) -> Candidate:
    return Candidate(
        id=minute + 1,
        text=text,
        origin=origin,
        confidence=confidence,
        created_at=START + timedelta(minutes=minute),
    )


def compose(
    document: str, *facts: Candidate, max_bytes: int = 32 * 1024, feedback: str | None = None
) -> Composition:
    return OfflineComposer().compose(
        Request(document=document, candidates=list(facts), max_bytes=max_bytes, feedback=feedback)
    )


def section_of(document: str, text: str) -> str:
    """The heading the bullet ``- text`` sits under."""
    section = ""
    for line in document.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line == f"- {text}":
            return section
    raise AssertionError(f"no bullet {text!r} in:\n{document}")


def bullets(document: str) -> list[str]:
    return [line[2:] for line in document.splitlines() if line.startswith("- ")]


# --- filing -----------------------------------------------------------------------------------


def test_the_example_lines_from_the_memory_guide_are_filed_under_their_sections():
    result = compose(TEMPLATE, *(fact(text, i) for i, text in enumerate(SEED.values())))
    for section, text in SEED.items():
        assert section_of(result.document, text) == section


def test_a_missing_section_is_created_in_the_canonical_order():
    document = "# Memory\n\n## House\n- The roof is slate.\n\n## Rules\n- Never unlock the door.\n"
    result = compose(document, fact(SEED["People"]))
    assert result.document == (
        "# Memory\n\n## House\n- The roof is slate.\n\n## People\n- " + SEED["People"] + "\n\n"
        "## Rules\n- Never unlock the door.\n"
    )
    assert "created section People" in result.notes


def test_sections_a_person_added_stay_where_they_put_them():
    document = "# Memory\n\n## Garden notes\n- Roses by the shed.\n\n## House\n- Slate roof.\n"
    result = compose(document, fact("Sarah is a light sleeper"))
    assert result.document.startswith("# Memory\n\n## Garden notes\n- Roses by the shed.\n\n")
    assert section_of(result.document, "Sarah is a light sleeper.") == "People"


def test_an_empty_document_gets_a_title_and_its_first_section():
    result = compose("", fact("The roof is slate"))
    assert result.document == "# Memory\n\n## House\n- The roof is slate.\n"


def test_a_candidate_becomes_a_bullet_with_tidy_spacing_and_a_full_stop():
    result = compose(TEMPLATE, fact("  The  roof\n is   slate "), fact("Is the loft warm?", 1))
    assert "- The roof is slate.\n" in result.document
    assert "- Is the loft warm?\n" in result.document


def test_an_empty_inbox_returns_the_document_unchanged():
    document = "# Memory\n\nmy   own   words\n\n## House\n-   odd   spacing\n"
    result = compose(document)
    assert result.document == document
    assert result.notes


# --- deduping and contradictions ---------------------------------------------------------------


def test_a_fact_said_again_in_other_case_and_punctuation_is_not_added_twice():
    document = TEMPLATE.replace("## People\n", "## People\n- Sarah is a light sleeper.\n")
    result = compose(document, fact("sarah is a light sleeper"))
    assert result.document == document
    assert result.notes[0].startswith("already known: sarah is a light sleeper.")


def test_a_paraphrase_sharing_its_words_is_not_added_twice():
    document = TEMPLATE.replace("## People\n", "## People\n- Sarah is a light sleeper.\n")
    result = compose(document, fact("Sarah sleeps lightly"))
    assert bullets(result.document) == ["Sarah is a light sleeper."]


def test_duplicates_among_the_candidates_themselves_are_folded():
    result = compose(
        TEMPLATE,
        fact("The loft is warm", 0),
        fact("the loft is warm.", 1),
        fact("The  loft is warm", 2),
    )
    assert bullets(result.document) == ["The loft is warm."]


def test_a_new_temperature_replaces_the_old_line_in_place():
    document = "# Memory\n\n## Rooms\n- The bedroom is kept at 19 degrees.\n- The loft is warm.\n"
    result = compose(document, fact("The bedroom is kept at 21 degrees"))
    assert result.document == (
        "# Memory\n\n## Rooms\n- The bedroom is kept at 21 degrees.\n- The loft is warm.\n"
    )
    assert "19 degrees → 21 degrees" in result.notes[0]


def test_a_statement_and_its_negation_are_never_merged_and_the_newest_wins():
    document = "# Memory\n\n## Devices\n- The hall light is on at night.\n"
    result = compose(document, fact("The hall light is not on at night"))
    assert bullets(result.document) == ["The hall light is not on at night."]
    assert not any(note.startswith("already known") for note in result.notes)


def test_among_the_candidates_the_newest_wins_whatever_order_they_arrive_in():
    older = fact("The bedroom is kept at 19 degrees", 0)
    newer = fact("The bedroom is kept at 21 degrees", 5)
    result = compose(TEMPLATE, newer, older)
    assert bullets(result.document) == ["The bedroom is kept at 21 degrees."]


def test_a_refinement_replaces_the_line_it_refines():
    document = "# Memory\n\n## House\n- Heating is an 8 kW air-source heat pump.\n"
    result = compose(document, fact(SEED["House"]))
    assert bullets(result.document) == [SEED["House"]]


def test_a_replaced_bullet_keeps_the_marker_the_person_used():
    document = "# Memory\n\n## Rooms\n* The bedroom is kept at 19 degrees.\n"
    result = compose(document, fact("The bedroom is kept at 21 degrees"))
    assert result.document == "# Memory\n\n## Rooms\n* The bedroom is kept at 21 degrees.\n"


# --- keeping what a person wrote ---------------------------------------------------------------


def test_a_persons_own_paragraph_and_odd_lines_are_kept_byte_for_byte():
    own = (
        "We moved in   in 2019;  the house   is *old*.\n"
        "Second line of my paragraph,   unwrapped.\n"
        "   indented text\t\n"
        "### my own subheading\n"
        "1. a numbered note\n"
        "-    a bullet with   odd spacing   \n"
    )
    document = "# Our house  \n\n" + own + "\n## Rooms\n- The loft is warm.\n"
    result = compose(document, fact("Sarah is a light sleeper"), fact("The loft is cold", 1))
    assert result.document.startswith("# Our house  \n\n" + own)
    assert "- Sarah is a light sleeper.\n" in result.document


def test_windows_line_endings_are_kept():
    document = "# Memory\r\n\r\n## Rooms\r\n- The loft is warm.\r\n"
    result = compose(document, fact("The bedroom is kept at 19 degrees"))
    assert result.document == (
        "# Memory\r\n\r\n## Rooms\r\n- The loft is warm.\r\n"
        "- The bedroom is kept at 19 degrees.\r\n"
    )


# --- the size cap --------------------------------------------------------------------------------


def _capped_document() -> str:
    return (
        "# Memory\n\n"
        "## House\n- The roof is slate.\n- The loft is insulated.\n\n"
        "## Rules\n- Never unlock the front door.\n"
    )


def test_the_cap_drops_low_confidence_then_the_oldest_lines_and_the_result_fits():
    document = _capped_document()
    unsure = fact("The cellar may flood in spring", 0, confidence="low")
    sure = fact("The porch has a motion light", 1)
    everything = compose(document, unsure, sure).document
    # Room for everything but the unsure line and one more.
    cap = len(everything.encode()) - len("- The cellar may flood in spring.\n") - 5

    result = compose(document, unsure, sure, max_bytes=cap)

    assert len(result.document.encode()) <= cap
    assert "The cellar may flood in spring." not in result.document  # low confidence goes first
    assert "The roof is slate." not in result.document  # then the oldest, earliest in its section
    assert "The loft is insulated." in result.document
    assert "- Never unlock the front door.\n" in result.document
    assert "dropped to fit memory_max_kb: The cellar may flood in spring." in result.notes


def test_rules_and_corrections_are_the_last_to_be_dropped():
    correction = fact("The loft hatch sticks in damp weather", 0, origin="correction")
    newest = fact("The porch has a motion light", 1)
    everything = compose(_capped_document(), correction, newest).document
    ordinary = ["The roof is slate.", "The loft is insulated.", "The porch has a motion light."]
    cap = len(everything.encode()) - sum(len(f"- {line}\n") for line in ordinary)

    result = compose(_capped_document(), correction, newest, max_bytes=cap)

    assert len(result.document.encode()) <= cap
    assert bullets(result.document) == [
        "The loft hatch sticks in damp weather.",
        "Never unlock the front door.",
    ]


def test_headings_and_the_title_are_never_dropped_even_when_nothing_fits():
    result = compose(_capped_document(), fact("The porch has a motion light"), max_bytes=10)
    assert result.document.splitlines()[0] == "# Memory"
    assert "## House" in result.document
    assert "## Rules" in result.document
    assert bullets(result.document) == []


def test_a_retry_after_an_over_cap_answer_aims_below_the_cap():
    document = _capped_document()
    candidate = fact("The porch has a motion light")
    cap = len(compose(document, candidate).document.encode())
    first = compose(document, candidate, max_bytes=cap)
    retry = compose(document, candidate, max_bytes=cap, feedback="over by 120 bytes")
    assert first.document == compose(document, candidate).document
    assert len(retry.document.encode()) <= cap * 0.9


# --- the voice distillate ----------------------------------------------------------------------


def test_voice_gives_rules_first_then_preferences_then_nicknames_then_people():
    document = (
        "# Memory\n\n## House\n- The roof is slate.\n\n## People\n- Sarah is a light sleeper.\n\n"
        "## Devices\n- The office lamp is called the beacon.\n\n"
        "## Preferences\n- Tom likes the lounge at 20.\n\n## Rules\n- Never unlock the door.\n"
    )
    assert distil_voice(document) == (
        "- Never unlock the door.\n"
        "- Tom likes the lounge at 20.\n"
        "- The office lamp is called the beacon.\n"
        "- Sarah is a light sleeper.\n"
        "- The roof is slate.\n"
    )


def test_voice_stays_within_2kb_even_with_300_long_lines_and_never_cuts_a_word():
    words = ["kitchen", "lamp", "brightness", "evening", "warm", "window", "radiator", "fridge"]
    lines = [" ".join(f"{words[(i + j) % 8]}{i}" for j in range(40)) + "." for i in range(300)]
    document = "# Memory\n\n## House\n" + "".join(f"- {line}\n" for line in lines)
    result = compose(document, fact("Never open the garage after dark"), max_bytes=64 * 1024)

    assert len(result.voice.encode()) <= VOICE_MAX_BYTES
    assert result.voice.startswith("- Never open the garage after dark.\n")
    known = {word.strip(".") for line in lines for word in line.split()}
    for line in result.voice.splitlines()[1:]:
        for word in line.removeprefix("- ").removesuffix("…").split():
            assert word.strip(".") in known, word


def test_a_small_document_is_carried_into_voice_whole():
    result = compose(TEMPLATE, *(fact(text, i) for i, text in enumerate(SEED.values())))
    assert sorted(result.voice.splitlines()) == sorted(f"- {text}" for text in SEED.values())


# --- contract -----------------------------------------------------------------------------------


def test_the_same_input_twice_gives_byte_identical_output():
    document = _capped_document() + "\nA note of my own.\n"
    facts = [fact(text, i) for i, text in enumerate(SEED.values())]
    facts.append(fact("The bedroom is kept at 19 degrees", 9, confidence="low"))
    first = compose(document, *facts, max_bytes=700)
    second = compose(document, *reversed(facts), max_bytes=700)
    assert first == second


def test_the_offline_composer_answers_the_composer_interface():
    composer: Composer = OfflineComposer()
    assert composer.name == "offline"
    result = composer.compose(
        Request(document=TEMPLATE, candidates=[fact("The roof is slate")], max_bytes=2048),
        timeout=1.0,
    )
    assert isinstance(result, Composition)


def test_voice_keeps_whole_lines_and_never_cuts_one_in_the_middle():
    diary = (
        "Family birthdays are kept in the green notebook in the kitchen drawer, as written in "
        "the family diary by Grandma Jean every January, with the presents each person was "
        "given and what they said they would like next year, so nobody is given the same "
        "thing twice and nobody is forgotten."
    )
    short = [f"Room {n} has a radiator under the window, set to 3 in winter." for n in range(40)]
    document = "# Memory\n\n## People\n" + "".join(f"- {t}\n" for t in [diary, *short])

    voice = distil_voice(document)

    assert len(voice.encode()) <= VOICE_MAX_BYTES
    lines = [line.removeprefix("- ") for line in voice.splitlines()]
    assert lines and all(line in [diary, *short] for line in lines)
    assert not any(line.endswith("\u2026") for line in lines)
