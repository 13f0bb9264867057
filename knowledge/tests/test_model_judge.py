"""BRAIN_GATE_JUDGE=anthropic: the model judges writes, within rules enforced in code."""

import pytest

from brain.models import ModelCall
from brain.tests.stubs.messages import stub_json, stub_overloaded
from knowledge.models import Fact
from memory.actions import learn
from memory.taught import Statement


@pytest.fixture
def stub(llm_stub, settings):
    settings.BRAIN_GATE_JUDGE = "anthropic"
    return llm_stub


def _learn(home, text):
    return learn(Statement.typed(memory=home, text=text, origin="typed"))


def test_the_model_judges_a_paraphrase_the_rules_would_miss(home, stub):
    old = _learn(home, "Deploys take twenty minutes.").fact  # nothing near: no model call
    stub.script(stub_json({"verdict": "same", "target": old.pk, "reason": "same duration"}))

    again = _learn(home, "A deploy lasts about 20 min.")

    assert again.verdict == "same"
    assert again.fact.pk == old.pk and again.fact.support == 2
    assert ModelCall.objects.get().task == "write_gate"
    assert f"[{old.pk}] Deploys take twenty minutes." in stub.requests[0].prompt


def test_a_model_calling_a_negation_the_same_fact_is_overruled(home, stub):
    old = _learn(home, "The hall light is on at night.").fact
    stub.script(stub_json({"verdict": "same", "target": old.pk, "reason": "close enough"}))

    new = _learn(home, "The hall light is not on at night.")

    assert new.verdict == "contradiction"
    assert Fact.objects.count() == 2


def test_when_the_model_fails_the_offline_judge_decides(home, stub):
    _learn(home, "Sarah is a light sleeper.")
    stub.script(stub_overloaded())

    again = _learn(home, "sarah is a light sleeper")

    assert again.verdict == "same"
    assert ModelCall.objects.get().state == "error"


def test_a_target_the_model_was_not_shown_is_not_trusted(home, stub):
    _learn(home, "Sarah is a light sleeper.")
    stub.script(stub_json({"verdict": "contradiction", "target": 999999, "reason": "?"}))

    again = _learn(home, "sarah is a light sleeper")

    assert again.verdict == "same"  # the offline judge's answer
