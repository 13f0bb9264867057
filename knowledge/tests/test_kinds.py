"""What a statement is, asked of one classifier (``knowledge.kinds.classify``): the kind a fact
is stored as, the section the offline composer files it under and the rank the voice distillate
gives it agree, sentence by sentence. No database."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from knowledge.kinds import SECTIONS, Classification, classify, kind_for
from memory.composers.base import Candidate, Request
from memory.composers.offline import OfflineComposer, bullet_text, distil_voice

RULE, PREFERENCE, NICKNAME = "rule", "preference", "nickname"
HEALTH, QUIRK, ROUTINE, NOTE = "health_note", "quirk", "routine", "note"

# One row per sentence: (sentence, the kind it is stored as, the section it is filed under).
# The rows marked "today:" were classified differently by the kind, the section or the voice.
TABLE = [
    # Rules: an instruction about what to do or never do.
    ("Never rename an entity_id without asking", RULE, "Rules"),
    ("Always ask before opening the garage door", RULE, "Rules"),
    ("Please never wake Sarah before 7", RULE, "Rules"),  # today: a note filed under Rules
    ("Don’t announce the post after 21:00", RULE, "Rules"),  # today: the curly ’ hid it
    ("Avoid running the tumble dryer overnight", RULE, "Rules"),  # today: a note
    ("The office must never go above 21 degrees", RULE, "Rules"),  # today: a note
    ("Ask before opening the garage door", RULE, "Rules"),  # today: a note
    ("Only heat the office on weekdays", RULE, "Rules"),  # today: a rule filed under Rooms
    ("Only Sarah uses the loft", NOTE, "People"),  # today: a rule filed under People
    # Preferences: what someone likes, wants or would rather.
    ("Sarah likes the landing lamp dim", PREFERENCE, "Preferences"),
    ("Tom would rather have the blinds open", PREFERENCE, "Preferences"),
    ("Tom prefers the bedroom at 19", PREFERENCE, "Preferences"),
    ("Grandma Jean doesn't like the heating above 20", PREFERENCE, "Preferences"),  # today: People
    ("My favourite room is the garden room", PREFERENCE, "Preferences"),  # today: a note
    ("The kids want the landing light on at night", PREFERENCE, "Preferences"),
    ("The lamp looks like a lantern", NOTE, "Devices"),  # today: a preference under Devices
    # Nicknames: another name for a device, a room or a person; filed with what it names.
    ("We call the office lamp the beacon", NICKNAME, "Devices"),
    ("light.office_lamp is called the beacon", NICKNAME, "Devices"),
    ("The office lamp, aka the beacon, sits by the desk", NICKNAME, "Devices"),  # today: a note
    ("The snug is short for the small sitting room", NICKNAME, "Rooms"),  # today: a note
    ("“The office” means the upstairs back bedroom", NICKNAME, "Rooms"),
    # Device health: a battery, a signal, a fault; expires, filed under Devices.
    ("The hall sensor's battery is at 12%", HEALTH, "Devices"),
    ("The router keeps dropping out", HEALTH, "Devices"),
    ("Sarah wants the hall sensor battery replaced", HEALTH, "Devices"),  # today: Preferences
    ("Tom hates that the router keeps dropping out", HEALTH, "Devices"),  # today: Preferences
    # Quirks: something that looks wrong and is not.
    ("The garage fridge's draw at 3 am is the defrost cycle, not a fault", QUIRK, "Devices"),
    ("The landing sensor reads high in the afternoon", QUIRK, "Devices"),
    ("The heat pump is normal to be loud in the morning", QUIRK, "House"),
    # Routines: what happens at a time or on a day.
    ("The bins go out every Tuesday night", ROUTINE, "Routines"),
    ("The heating comes on at 6:30 on weekdays", ROUTINE, "Routines"),
    ("The kids go to bed at 19:30 on weekdays", ROUTINE, "Routines"),
    ("Sarah goes running every morning", ROUTINE, "Routines"),
    ("The fridge defrosts itself each week", NOTE, "Devices"),  # today: a routine under Devices
    # Everything else is a note, filed under the section of what it is about.
    ("The hall light is on at night", NOTE, "Devices"),
    ("Sarah is a light sleeper", NOTE, "People"),
    ("The house has solar panels on the south roof", NOTE, "House"),
    ("Sarah's bedroom is the loft", NOTE, "Rooms"),
    ("Our postcode is AB1 2CD", NOTE, "House"),
    ("Tom works from home on Fridays", NOTE, "People"),
    ("zzz qqq", NOTE, "House"),
]

TEMPLATE = "# Memory\n\n## House\n\n## People\n\n## Rooms\n\n## Devices\n\n## Routines\n"
PLAIN = "The roof is slate."  # a House note: the voice ranks it last


def filed_under(text: str) -> str:
    """The heading the offline composer files ``text`` under."""
    when = datetime(2025, 3, 1, tzinfo=UTC)
    candidate = Candidate(id=1, text=text, origin="chat", confidence="high", created_at=when)
    composed = OfflineComposer().compose(
        Request(document=TEMPLATE, candidates=[candidate], max_bytes=8192)
    )
    section = ""
    for line in composed.document.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line == f"- {bullet_text(text)}":
            return section
    raise AssertionError(f"{text!r} was not filed:\n{composed.document}")


def spoken_before_a_plain_note(text: str) -> bool:
    """Whether the voice distillate puts ``text`` ahead of a plain note written above it, both
    under a heading of the person's own that says nothing about either."""
    voice = distil_voice(f"# Memory\n\n## Notes\n\n- {PLAIN}\n- {text}\n")
    return voice.index(text) < voice.index(PLAIN)


@pytest.mark.parametrize(("text", "kind", "section"), TABLE)
def test_a_sentence_is_one_kind_filed_in_one_section(text, kind, section):
    assert classify(text) == Classification(kind, section)
    assert section in SECTIONS


def test_nothing_said_is_a_note_about_the_house():
    assert classify("") == classify("  ") == Classification(NOTE, "House")


def test_a_correction_is_a_kind_only_the_caller_knows():
    assert kind_for("Never rename an entity_id without asking", correction=True) == "correction"


@pytest.mark.parametrize(("text", "kind", "section"), TABLE)
def test_a_sentence_is_stored_as_the_kind_in_the_table(text, kind, section):
    assert kind_for(text) == kind


@pytest.mark.parametrize(("text", "kind", "section"), TABLE)
def test_the_offline_composer_files_a_sentence_under_the_section_in_the_table(text, kind, section):
    assert filed_under(text) == section


@pytest.mark.parametrize(("text", "kind", "section"), TABLE)
def test_the_voice_speaks_rules_preferences_nicknames_and_people_first(text, kind, section):
    first = kind in (RULE, PREFERENCE, NICKNAME) or section == "People"
    assert spoken_before_a_plain_note(text) == first


def _gate_sentences() -> list[str]:
    path = Path(__file__).resolve().parents[2] / "bench" / "gate_pairs.jsonl"
    pairs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted({pair[side] for pair in pairs for side in ("old", "new")})


def test_on_a_thousand_real_sentences_rules_preferences_and_routines_are_filed_where_they_belong():
    """Every sentence of the gate's labelled pairs: Rules holds exactly the rules, Preferences
    exactly the preferences, and a routine is always under Routines."""
    mismatched = []
    for text in _gate_sentences():
        kind, section = kind_for(text), filed_under(text)
        if (
            (kind == RULE) != (section == "Rules")
            or (kind == PREFERENCE) != (section == "Preferences")
            or (kind == ROUTINE and section != "Routines")
        ):
            mismatched.append(f"{text!r}: a {kind} filed under {section}")
    assert not mismatched, "\n".join(mismatched)
