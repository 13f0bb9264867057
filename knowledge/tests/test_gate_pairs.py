"""The labelled statement pairs the write gate is scored on (bench/gate_pairs.jsonl), and the hard
pairs it must never get wrong again: each judged by ``gate.relate`` with MiniLM embeddings, as the
app judges with its default embedder. No database: relate is pure."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.gate_quality import CASES, CONVERSATIONAL, PairsError, load_pairs
from knowledge.embedding import MiniLMEmbedder
from knowledge.gate import Said, relate

PAIRS = load_pairs()
HARD = [pair for pair in PAIRS if pair.hard]

# What the set was asked to hold, at least, per case.
MINIMUMS = {
    "paraphrase": 80,
    "restatement": 20,
    "refinement": 40,
    "explicit_contradiction": 60,
    "implicit_contradiction": 50,
    "negation": 30,
    "template_lookalike": 80,
    "different_person": 25,
    "same_person_change": 10,
    "independent": 50,
    "unrelated": 15,
    # From conversation: at least 150 pairs of these.
    "greeting": 20,
    "thanks": 20,
    "two_speakers": 30,
    "change_of_value": 15,
    "change_of_owner": 15,
    "change_of_date": 15,
    "change_of_place": 15,
    "change_of_state": 15,
    "conversation_restatement": 15,
}
CHANGES = [case for case in CONVERSATIONAL if case.startswith("change_of_")]


def test_the_pairs_file_holds_at_least_450_pairs_with_unique_ids_and_every_case_filled():
    assert len(PAIRS) >= 450 + 150
    assert sum(pair.case in CONVERSATIONAL for pair in PAIRS) >= 150
    assert len({pair.id for pair in PAIRS}) == len(PAIRS)
    counts = Counter(pair.case for pair in PAIRS)
    assert set(MINIMUMS) == set(CASES)
    short = {case: counts[case] for case, least in MINIMUMS.items() if counts[case] < least}
    assert not short, f"cases below their minimum: {short}"


def test_about_30_percent_of_every_case_is_held_out_and_no_hard_pair_is():
    for case in CASES:
        of_case = [pair for pair in PAIRS if pair.case == case]
        held_out = sum(pair.split == "held_out" for pair in of_case)
        assert 0.25 <= held_out / len(of_case) <= 0.35, case
    assert not [pair.id for pair in HARD if pair.split == "held_out"]


def test_every_pair_from_the_user_report_is_hard_and_70_to_90_pairs_are():
    from_issue = [pair for pair in PAIRS if pair.from_issue]
    assert len(from_issue) >= 11
    assert all(pair.hard for pair in from_issue)
    assert 70 <= len(HARD) <= 90


def test_pairs_about_a_speaker_name_both_speakers():
    for pair in PAIRS:
        if pair.case in ("different_person", "same_person_change", "two_speakers"):
            assert pair.old_by and pair.new_by, pair.id
            assert (pair.old_by == pair.new_by) == (pair.case == "same_person_change"), pair.id


def test_a_bad_line_is_refused_with_its_line_number(tmp_path):
    good = {
        "id": "p1",
        "domain": "coding",
        "case": "negation",
        "old": "CI runs on pushes.",
        "new": "CI doesn't run on pushes.",
        "label": "contradiction",
        "split": "dev",
        "hard": False,
        "from_issue": False,
    }
    broken = [
        ({**good, "id": "p2", "label": "novel"}, "a negation pair is labelled contradiction"),
        ({**good, "id": "p2", "case": "antonym"}, "unknown case 'antonym'"),
        ({**good, "id": "p2", "split": "test"}, "unknown split 'test'"),
        ({**good, "id": "p2", "new": "  "}, "new is empty"),
        ({**good, "id": "p2", "hard": "yes"}, "hard must be a bool"),
        (good, "id p1 is used already on line 1"),
    ]
    for row, message in broken:
        path = tmp_path / "pairs.jsonl"
        path.write_text(json.dumps(good) + "\n\n" + json.dumps(row) + "\n")
        with pytest.raises(PairsError, match=rf"line 3: {message}"):
            load_pairs(path)
    path.write_text("{not json\n")
    with pytest.raises(PairsError, match="line 1: not valid JSON"):
        load_pairs(path)


@pytest.fixture(scope="module")
def vectors() -> dict[str, list[float]]:
    """MiniLM vectors of every hard pair's statements, the model loaded once for this module."""
    texts = sorted({text for pair in HARD for text in (pair.old, pair.new)})
    return dict(zip(texts, MiniLMEmbedder().embed(texts), strict=True))


@pytest.mark.parametrize("pair", HARD, ids=[pair.id for pair in HARD])
def test_the_gate_judges_a_hard_pair_as_labelled(pair, vectors, settings):
    settings.BRAIN_EMBEDDER = "minilm"  # should the gate ask for the embedder itself
    relation = relate(
        Said(pair.old, pair.old_by, vectors[pair.old]),
        Said(pair.new, pair.new_by, vectors[pair.new]),
    )
    acceptable = {pair.label, "conflict"} if pair.label == "contradiction" else {pair.label}
    assert relation.verdict in acceptable, (
        f"{pair.case}: {pair.old!r} ({pair.old_by or '-'}) then {pair.new!r} "
        f"({pair.new_by or '-'}) was judged {relation.verdict} ({relation.reason}), "
        f"not {' or '.join(sorted(acceptable))}"
    )


@pytest.fixture(scope="module")
def conversational() -> list:
    """Every pair from conversation, judged with MiniLM vectors (the model loaded once)."""
    pairs = [pair for pair in PAIRS if pair.case in CONVERSATIONAL]
    texts = sorted({text for pair in pairs for text in (pair.old, pair.new)})
    vectors = dict(zip(texts, MiniLMEmbedder().embed(texts), strict=True))
    return [
        (
            pair,
            relate(
                Said(pair.old, pair.old_by, vectors[pair.old]),
                Said(pair.new, pair.new_by, vectors[pair.new]),
            ),
        )
        for pair in pairs
    ]


def test_a_greeting_thanks_or_another_speakers_words_is_never_the_same_fact_nor_replaces_one(
    conversational,
):
    wrong = [
        f"{pair.id} {pair.case}: {relation.verdict} ({relation.reason})"
        for pair, relation in conversational
        if pair.case in ("greeting", "thanks", "two_speakers")
        and relation.verdict in ("same", "contradiction", "refinement")
    ]
    assert not wrong


def test_a_change_of_value_owner_date_place_or_state_is_never_merged_and_mostly_replaces(
    conversational,
):
    changes = [(pair, relation) for pair, relation in conversational if pair.case in CHANGES]
    merged = [pair.id for pair, relation in changes if relation.verdict == "same"]
    caught = [r for _, r in changes if r.verdict in ("contradiction", "conflict")]
    assert not merged
    assert len(caught) / len(changes) >= 0.85, f"{len(caught)} of {len(changes)}"
