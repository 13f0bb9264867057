"""Questions embedded with the MiniLM weights in 8-bit arithmetic: the model's own weights,
vectors close to the float model's that find the same facts, and the float model whenever the
rewrite is not there, not close or not faster. No database."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from knowledge import embedding, question_model
from knowledge.embedding import HashEmbedder, MiniLMEmbedder, embed_question, minilm_files

QUESTIONS = [
    "Who feeds the cat?",
    "When does the dishwasher run on weekdays?",
    "What temperature does Sarah like the bedroom at when she goes to sleep in winter?",
    "Is the garage door usually left open after ten at night, and who closes it?",
    "Why did the backup job fail last Tuesday?",
]


@pytest.fixture
def fresh_choice(monkeypatch):
    """The question model chosen again for this test, and forgotten after it."""
    monkeypatch.setattr(embedding, "_question_model", None)


def _dequantised(model: onnx.ModelProto) -> list[np.ndarray]:
    """Every MatMulNBits node's weights as the float [inner, columns] matrix it multiplies by."""
    weights = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    matrices = []
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        packed, scales, zeros = (weights[name] for name in node.input[1:4])
        columns, blocks, block = packed.shape
        values = packed.astype(np.float32) - zeros.reshape(columns, blocks, 1)
        matrix = values * scales.reshape(columns, blocks, 1)
        matrices.append(matrix.reshape(columns, blocks * block).T)
    return matrices


def _stored(model: onnx.ModelProto) -> list[np.ndarray]:
    """Every int8 matrix of the installed model times its scale per column, as float."""
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    made_by = {output: node for node in model.graph.node for output in node.output}
    matrices = []
    for node in model.graph.node:
        if node.op_type == "MatMul":
            found = question_model._int8_weights(node, made_by, weights)
            if found is not None:
                values, scales = found
                matrices.append(values.astype(np.float32) * scales)
    return matrices


def test_the_rewritten_model_multiplies_by_exactly_the_installed_models_weights():
    installed = onnx.load(str(minilm_files()[0]))
    rewritten = onnx.load_from_string(question_model.quantised(minilm_files()[0]))

    expected, got = _stored(installed), _dequantised(rewritten)
    assert len(expected) == len(got) == 36  # six layers: q, k, v, out, two feed-forward
    for before, after in zip(expected, got, strict=True):
        np.testing.assert_array_equal(after, before)
    int8 = [
        tuple(tensor.dims)
        for tensor in rewritten.graph.initializer
        if tensor.data_type == onnx.TensorProto.INT8
    ]
    # Only the tables read by a Gather stay int8: word pieces and positions.
    assert sorted(int8) == [(512, 384), (30522, 384)]


def _faster(which: str):
    """A stand-in for ``embedding._fastest_run`` in which ``which`` ("8-bit" or "float")
    runs faster: the speeds of a CPU other than the one under test."""

    def timed(model, times=5):
        is_float = model is embedding._load_minilm()
        return 1.0 if is_float == (which == "8-bit") else 0.5

    return timed


def test_a_question_is_embedded_by_the_8_bit_model_close_to_the_float_models_vector(
    fresh_choice, monkeypatch
):
    monkeypatch.setattr(embedding, "_fastest_run", _faster("8-bit"))
    minilm = MiniLMEmbedder()

    for question in QUESTIONS:
        asked, exact = (
            np.array(minilm.embed_question(question)),
            np.array(minilm.embed_one(question)),
        )
        assert np.linalg.norm(asked) == pytest.approx(1.0, abs=1e-9)
        assert question_model.MIN_COSINE <= asked @ exact < 1 - 1e-7  # close, and not the same
    assert embedding._question_model is not embedding._load_minilm()


def test_on_a_cpu_where_8_bits_are_slower_questions_take_the_float_model(
    fresh_choice, monkeypatch, caplog
):
    monkeypatch.setattr(embedding, "_fastest_run", _faster("float"))

    with caplog.at_level(logging.INFO, logger="knowledge.embedding"):
        question = QUESTIONS[2]
        assert MiniLMEmbedder().embed_question(question) == MiniLMEmbedder().embed_one(question)

    assert "float model (no faster than the float model)" in caplog.text


def test_a_question_finds_the_facts_the_float_model_would_find(fresh_choice, monkeypatch):
    """The nearest of 60 household facts to each question, by its 8-bit vector and by the
    float one: the same fact."""
    monkeypatch.setattr(embedding, "_fastest_run", _faster("8-bit"))
    minilm = MiniLMEmbedder()
    facts = [
        f"The {thing} in the {room} is {state}."
        for thing in ("lamp", "heater", "window", "speaker")
        for room in ("kitchen", "bedroom", "garage", "office", "hall")
        for state in ("on", "broken", "new")
    ]
    stored = np.array(minilm.embed(facts))
    for question in ("Is the garage heater working?", "Which lamp is new?", QUESTIONS[3]):
        exact = stored @ np.array(minilm.embed_one(question))
        asked = stored @ np.array(minilm.embed_question(question))
        assert np.argmax(asked) == np.argmax(exact)


def test_the_float_model_answers_questions_when_there_is_no_rewrite(
    fresh_choice, monkeypatch, caplog
):
    monkeypatch.setattr(question_model, "quantised", lambda path: None)

    with caplog.at_level(logging.INFO, logger="knowledge.embedding"):
        chosen = embedding._load_question_model()

    assert chosen is embedding._load_minilm()
    assert "float model (the onnx package or the model's int8 weights are missing)" in caplog.text
    question = QUESTIONS[1]
    assert MiniLMEmbedder().embed_question(question) == MiniLMEmbedder().embed_one(question)


def test_a_rewrite_not_close_enough_to_the_float_model_is_not_used(
    fresh_choice, monkeypatch, caplog
):
    monkeypatch.setattr(embedding, "_fastest_run", _faster("8-bit"))
    monkeypatch.setattr(question_model, "MIN_COSINE", 1.5)

    with caplog.at_level(logging.INFO, logger="knowledge.embedding"):
        chosen = embedding._load_question_model()

    assert chosen is embedding._load_minilm()
    assert "Questions are embedded with the float model (cosine 0.99" in caplog.text


def test_a_model_without_int8_weight_matrices_is_not_rewritten(tmp_path):
    matrix = numpy_helper.from_array(np.ones((32, 4), np.float32), "weights")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weights"], ["y"])],
        "float",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
        initializer=[matrix],
    )
    path = tmp_path / "float.onnx"
    onnx.save(helper.make_model(graph), str(path))

    assert question_model.quantised(path) is None


def test_an_embedder_without_a_question_model_embeds_questions_as_facts():
    hashed = HashEmbedder()

    assert embed_question(hashed, QUESTIONS[0]) == hashed.embed_one(QUESTIONS[0])


def test_warming_up_loads_the_question_model_before_any_question(fresh_choice, settings):
    settings.BRAIN_EMBEDDER = "minilm"

    embedding.warm_up()

    assert embedding._question_model is not None


def test_warming_up_with_the_hash_embedder_loads_no_model(monkeypatch, settings):
    settings.BRAIN_EMBEDDER = "hash"
    monkeypatch.setattr(embedding, "_load_question_model", lambda: pytest.fail("loaded"))

    embedding.warm_up()
