"""Embedding facts offline: what the vectors promise (384 floats, unit length, one name per
algorithm), what MiniLM knows about meaning, and that the hash embedder is the same everywhere.
No database."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from knowledge import embedding
from knowledge.embedding import (
    DIMENSIONS,
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    cosine,
    get_embedder,
)

PROJECT = Path(__file__).resolve().parents[2]

# Household facts said two ways, several with hardly a word in common.
PARAPHRASES = [
    ("Sarah sleeps lightly", "Sarah is a light sleeper"),
    ("Tom is allergic to cats", "Cats give Tom an allergic reaction"),
    ("The dishwasher runs every night at ten", "Every evening at 10 pm the dishwasher starts"),
    ("The front door lock jams in cold weather", "When it's freezing the front door gets stuck"),
    ("The lounge is too cold in winter", "In winter the living room gets chilly"),
    (
        "The heating is a heat pump, not a boiler",
        "We heat the house with an air-source heat pump rather than a gas boiler",
    ),
    (
        "The garage fridge draws more power at 3 am because it defrosts",
        "At 3 in the morning the garage freezer's defrost cycle makes its power use jump",
    ),
    ("The office is the upstairs back bedroom", "The back bedroom upstairs is used as the office"),
]

MIXED = [
    "Hi",
    "",
    "!!!",
    "Sarah is a light sleeper",
    "light.office_lamp is the desk lamp in the upstairs office",
    "Heating is an 8 kW air-source heat pump on weather compensation. It is not a boiler, so "
    "“boost the heating” means raising the flow temperature. " * 3,
] + [f"Fact number {i} about room {i % 7}" for i in range(30)]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """The MiniLM embedder, its model loaded once for this module."""
    embedder = MiniLMEmbedder()
    embedder.embed_one("warm up")
    return embedder


@pytest.fixture(params=["hash", "minilm"])
def any_embedder(request: pytest.FixtureRequest) -> Embedder:
    if request.param == "minilm":
        return request.getfixturevalue("minilm")
    return HashEmbedder()


def _assert_unit_vectors(vectors: list[list[float]]) -> None:
    for vector in vectors:
        assert len(vector) == DIMENSIONS
        assert all(isinstance(value, float) and math.isfinite(value) for value in vector)
        assert math.hypot(*vector) == pytest.approx(1.0, abs=1e-9)


# --- What every embedder promises ---------------------------------------------------------


def test_every_vector_is_384_floats_of_unit_length(any_embedder):
    _assert_unit_vectors(any_embedder.embed(MIXED))
    _assert_unit_vectors([any_embedder.embed_one("The loft is warm")])


def test_embedding_a_batch_gives_the_same_vectors_as_one_at_a_time_in_order(any_embedder):
    batch = any_embedder.embed(MIXED)
    for text, vector in zip(MIXED, batch, strict=True):
        assert any_embedder.embed_one(text) == pytest.approx(vector, abs=1e-6)


def test_embedding_no_texts_gives_no_vectors(any_embedder):
    assert any_embedder.embed([]) == []


def test_a_text_is_most_similar_to_itself(any_embedder):
    vector = any_embedder.embed_one("The boiler is in the utility room")
    assert cosine(vector, vector) == pytest.approx(1.0)
    assert math.sumprod(vector, vector) == pytest.approx(cosine(vector, vector))


def test_each_embedder_has_its_own_versioned_name():
    hash_name, minilm_name = get_embedder("hash").name, get_embedder("minilm").name
    assert hash_name != minilm_name
    assert hash_name.endswith("-v1")
    assert minilm_name.endswith("-v1")
    assert isinstance(get_embedder("hash"), Embedder)
    assert isinstance(get_embedder("minilm"), Embedder)


# --- MiniLM: meaning --------------------------------------------------------------------------


def test_minilm_puts_an_aborted_batch_closer_to_a_failed_job_than_to_the_garden(minilm):
    aborted, failed, garden = minilm.embed(
        ["the batch aborted", "the job failed", "the garden is lovely in June"]
    )
    assert cosine(aborted, failed) > cosine(aborted, garden) + 0.2


def test_minilm_ranks_each_household_paraphrase_first_among_the_others(minilm):
    said_once = minilm.embed([first for first, _ in PARAPHRASES])
    said_again = minilm.embed([second for _, second in PARAPHRASES])
    for i, vector in enumerate(said_once):
        similarities = [cosine(vector, candidate) for candidate in said_again]
        best = max(range(len(similarities)), key=similarities.__getitem__)
        assert best == i, f"{PARAPHRASES[i][0]!r} matched {PARAPHRASES[best][1]!r}"


def test_minilm_reads_only_the_first_256_word_pieces_of_a_long_text(minilm):
    opening = "the hallway light stays dim at night " * 60  # well over 256 word pieces
    one, other = minilm.embed([opening + "and the boiler", opening + "and the garden is lovely"])
    assert one == pytest.approx(other, abs=1e-6)


def test_minilm_gives_the_same_vectors_from_several_threads_at_once(minilm, monkeypatch):
    expected = minilm.embed_one("Sarah sleeps lightly")
    monkeypatch.setattr(embedding, "_model", None)  # the first threads race to load it
    results: list[list[float]] = []

    def embed() -> None:
        results.append(MiniLMEmbedder().embed_one("Sarah sleeps lightly"))

    threads = [threading.Thread(target=embed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    for vector in results:
        assert vector == pytest.approx(expected, abs=1e-6)


# --- Hash embedder: the same everywhere ----------------------------------------------------------

_HASH_IN_A_NEW_PROCESS = """
import json, sys
from knowledge.embedding import HashEmbedder
print(json.dumps(HashEmbedder().embed(json.loads(sys.argv[1]))))
"""


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_hash_vectors_are_identical_in_another_process(hash_seed):
    texts = ["Sarah is a light sleeper", "light.office_lamp is the desk lamp", "Ünïcode café"]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONHASHSEED"] = hash_seed  # a different salt for Python's hash() in each process
    result = subprocess.run(
        [sys.executable, "-c", _HASH_IN_A_NEW_PROCESS, json.dumps(texts)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(result.stdout) == HashEmbedder().embed(texts)


def test_hash_embedder_finds_facts_that_share_words_but_not_synonyms():
    hasher = HashEmbedder()
    sarah, light_sleeper, dishwasher = hasher.embed(
        ["Sarah sleeps lightly", "Sarah is a light sleeper", "The dishwasher runs at ten"]
    )
    assert cosine(sarah, light_sleeper) > cosine(sarah, dishwasher) + 0.2
    assert hasher.embed_one("SARAH  sleeps, lightly!") == sarah


def test_a_text_with_no_letters_or_digits_still_gets_a_unit_vector():
    vectors = HashEmbedder().embed(["", "   ", "?!…"])
    _assert_unit_vectors(vectors)
    assert vectors[0] == vectors[1] == vectors[2]


# --- Choosing an embedder ------------------------------------------------------------------------


def test_get_embedder_uses_the_setting(settings):
    settings.BRAIN_EMBEDDER = "hash"
    assert get_embedder().name == HashEmbedder.name
    settings.BRAIN_EMBEDDER = "minilm"
    assert get_embedder().name == MiniLMEmbedder.name


def test_get_embedder_accepts_the_name_stored_beside_a_vector():
    assert get_embedder("minilm-int8-v1").name == "minilm-int8-v1"
    assert get_embedder("hash-ngram-v1").name == "hash-ngram-v1"


def test_without_the_minilm_packages_it_falls_back_to_hash_and_warns_once(
    settings, monkeypatch, caplog
):
    monkeypatch.setattr(embedding, "minilm_available", lambda: False)
    monkeypatch.setattr(embedding, "_warned", False)
    settings.BRAIN_EMBEDDER = "minilm"
    with caplog.at_level(logging.WARNING, logger="knowledge.embedding"):
        first, second = get_embedder(), get_embedder("minilm")
    assert first.name == second.name == HashEmbedder.name
    warnings = [r for r in caplog.records if r.name == "knowledge.embedding"]
    assert len(warnings) == 1
    assert "hash embedder" in warnings[0].getMessage()


def test_an_unknown_embedder_is_refused_with_the_choices(settings):
    with pytest.raises(ValueError, match=r"'bert'.*minilm, hash"):
        get_embedder("bert")
    settings.BRAIN_EMBEDDER = "bert"
    with pytest.raises(ImproperlyConfigured, match="BRAIN_EMBEDDER"):
        get_embedder()


def test_cosine_of_mismatched_or_zero_vectors():
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 0.0], [-2.0, 0.0]) == -1.0
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError, match="different lengths: 2 and 3"):
        cosine([1.0, 0.0], [1.0, 0.0, 0.0])
