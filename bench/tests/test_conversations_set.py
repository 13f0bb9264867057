"""The conversations the gate is measured on (bench/conversations.txt), the reader that loads
them, and the scoring: a small set taught through learn is scored line by line as marked."""

from __future__ import annotations

import pytest

from bench.conversations import ConversationsError, load, score, teach


def test_the_set_holds_at_least_20_conversations_of_two_or_three_people_over_sessions():
    conversations = load()

    assert len(conversations) >= 20
    assert all(len(c.people) in (2, 3) for c in conversations)
    assert all(len(c.sessions) >= 2 for c in conversations)
    assert sum(len(c.people) == 3 for c in conversations) >= 4
    lines = [line for c in conversations for line in c.lines]
    assert len(lines) >= 400
    assert sum(line.needed for line in lines) >= 150
    assert sum(bool(line.changes) for line in lines) >= 50
    assert sum(bool(line.repeats) for line in lines) >= 20


def test_a_bad_line_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "set.txt"
    bad = [
        ("=== c1: Ann, Bob\n--- day 0\nCal: Hi.\n", "line 3: Cal is not one of Ann, Bob"),
        ("=== c1: Ann, Bob\nAnn: Hi.\n", "line 2: a turn before the first session"),
        ("=== c1: Ann, Bob\n--- day 0\nAnn =x: Hi.\n", "line 3: x is not a tag said before"),
        (
            "=== c1: Ann, Bob\n--- day 0\nAnn [x]: A.\nBob [x]: B.\n",
            "line 4: the tag x is used already",
        ),
        ("=== c1: Ann, Bob\n--- day 0\nhello there\n", "line 3: not a turn"),
    ]
    for text, message in bad:
        path.write_text(text)
        with pytest.raises(ConversationsError, match=message):
            load(path)


SMALL = """
=== t1: Ann, Bob
--- day 0
Ann: Hi Bob! Great to see you, what's new?
Bob [bob-job] *: I got laid off from the bank yesterday, so it's been a rough week.
Ann: Oh no, I'm so sorry.
Ann [ann-run] *: I run with the park club on Thursdays.
Bob [bob-run] *: I run with the park club on Thursdays too.
Bob: Thanks, really appreciate the support!
--- day 9
Bob >bob-job *: I got a job at the library, I start on 3 May.
Ann =ann-run: I still run with the park club on Thursdays.
Ann [ann-dentist] *: My dentist appointment is on 12 June.
--- day 20
Ann >ann-dentist *: The dentist moved my appointment to 19 June.
"""


def test_a_small_set_taught_line_by_line_is_scored_as_marked(home, tmp_path):
    path = tmp_path / "small.txt"
    path.write_text(SMALL)

    taught, _seconds = teach(home, load(path))
    result = score(taught)

    assert result.turns == 10
    assert sum(result.refused.values()) == 3  # the greeting, "so sorry", the thanks
    assert result.needed_lost == 0
    assert not result.across_wrong
    assert result.merged_right == 1
    assert result.changes_caught == 1  # the dentist; a new job is no "laid off" undone
