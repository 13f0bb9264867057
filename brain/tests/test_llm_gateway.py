"""The LLM gateway, driven through the real Anthropic SDK against a Messages API stub."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pydantic
import pytest
from django.conf import settings as django_settings

from brain import llm
from brain.models import ModelCall
from brain.tests.stubs.messages import (
    stub_error,
    stub_hang,
    stub_json,
    stub_overloaded,
    stub_text,
)


class Verdict(pydantic.BaseModel):
    answer: str
    sure: bool


@pytest.fixture
def stub(llm_stub, settings):
    settings.BRAIN_LLM_MODEL = "claude-test-model"
    return llm_stub


def ask(**overrides):
    arguments = {
        "task": "test",
        "system": "You answer briefly.",
        "prompt": "Is the loft warm?",
        "max_tokens": 300,
        "timeout": 5.0,
    }
    return llm.complete(**{**arguments, **overrides})


def test_a_good_answer_is_returned_and_recorded_with_tokens_latency_and_state_ok(stub, db):
    stub.script(stub_text("Yes, the loft is warm.", input_tokens=31, output_tokens=9))

    answer = ask(task="consolidate")

    assert answer.text == "Yes, the loft is warm."
    assert answer.parsed is None
    call = ModelCall.objects.get(pk=answer.call_id)
    assert call.state == "ok"
    assert call.task == "consolidate"
    assert call.provider == "anthropic"
    assert call.model == "claude-test-model"
    assert (call.input_tokens, call.output_tokens) == (31, 9)
    assert call.output == "Yes, the loft is warm."
    assert call.input_bytes == len(b"You answer briefly.") + len(b"Is the loft warm?")
    assert call.latency_ms >= 0
    assert call.timeout_s == 5.0
    assert call.attempts == 1
    assert call.error == ""


def test_the_request_carries_the_model_from_settings_max_tokens_system_and_prompt(stub, db):
    stub.script(stub_text("ok"))

    ask(max_tokens=777)

    (request,) = stub.requests
    assert request.path == "/v1/messages"
    assert request.body["model"] == "claude-test-model"
    assert request.body["max_tokens"] == 777
    assert request.system == "You answer briefly."
    assert request.prompt == "Is the loft warm?"


def test_structured_output_is_asked_for_as_json_and_returned_validated(stub, db):
    stub.script(stub_json({"answer": "warm", "sure": True}))

    answer = ask(output=Verdict)

    assert answer.parsed == Verdict(answer="warm", sure=True)
    assert "JSON" in stub.requests[0].system
    assert '"sure"' in stub.requests[0].system  # the schema travels with the request
    assert ModelCall.objects.get(pk=answer.call_id).state == "ok"


def test_a_json_answer_inside_a_code_fence_is_accepted(stub, db):
    stub.script(stub_json({"answer": "warm", "sure": False}, fenced=True))

    assert ask(output=Verdict).parsed == Verdict(answer="warm", sure=False)


def test_garbage_raises_invalid_output_and_is_recorded_as_invalid_with_the_raw_answer(stub, db):
    stub.script(stub_text("I'm sorry, I can't help with the loft.", output_tokens=12))

    with pytest.raises(llm.LLMInvalidOutput) as raised:
        ask(output=Verdict)

    assert "not JSON" in str(raised.value)
    assert "can't help with the loft" in str(raised.value)
    call = ModelCall.objects.get()
    assert call.state == "invalid"
    assert call.output == "I'm sorry, I can't help with the loft."
    assert call.output_tokens == 12
    assert call.error == str(raised.value)


def test_json_missing_a_field_is_invalid_and_names_the_field(stub, db):
    stub.script(stub_json({"answer": "warm"}))

    with pytest.raises(llm.LLMInvalidOutput, match="sure"):
        ask(output=Verdict)

    assert ModelCall.objects.get().state == "invalid"


def test_an_answer_cut_off_at_max_tokens_is_invalid_and_says_so(stub, db):
    stub.script(stub_text('{"answer": "wa', stop_reason="max_tokens"))

    with pytest.raises(llm.LLMInvalidOutput, match="max_tokens"):
        ask(output=Verdict)


def test_a_hanging_model_times_out_within_about_the_given_timeout_and_records_timeout(stub, db):
    stub.script(stub_hang(30))

    started = time.monotonic()
    with pytest.raises(llm.LLMTimeout) as raised:
        ask(timeout=1.0)
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 2.5
    assert "timed out" in str(raised.value)
    call = ModelCall.objects.get()
    assert call.state == "timeout"
    assert call.timeout_s == 1.0
    assert 900 <= call.latency_ms < 2500
    assert call.input_tokens is None
    assert len(stub.requests) == 1  # a timeout is not retried: the deadline is spent


def test_a_timeout_of_zero_raises_at_once_without_calling_the_model(stub, db):
    with pytest.raises(llm.LLMTimeout):
        ask(timeout=0)

    assert stub.requests == []
    call = ModelCall.objects.get()
    assert (call.state, call.attempts) == ("timeout", 0)


def test_an_overloaded_model_is_unavailable_with_its_own_words_and_recorded_as_error(stub, db):
    stub.script(stub_overloaded())

    with pytest.raises(llm.LLMUnavailable) as raised:
        ask()

    assert str(raised.value) == "Anthropic API 529 overloaded_error: Overloaded"
    call = ModelCall.objects.get()
    assert call.state == "error"
    assert call.error == str(raised.value)
    assert len(stub.requests) == 1  # BRAIN_LLM_MAX_RETRIES is 0 here


def test_a_server_error_is_retried_once_and_the_second_answer_is_used(stub, settings, db):
    settings.BRAIN_LLM_MAX_RETRIES = 1
    stub.script(stub_error(500, "api_error", "Internal server error"), stub_text("ok"))

    answer = ask()

    assert answer.text == "ok"
    assert len(stub.requests) == 2
    call = ModelCall.objects.get()
    assert (call.state, call.attempts) == ("ok", 2)


def test_retries_stop_at_the_configured_count(stub, settings, db):
    settings.BRAIN_LLM_MAX_RETRIES = 1
    stub.script(stub_overloaded())

    with pytest.raises(llm.LLMUnavailable):
        ask()

    assert len(stub.requests) == 2
    assert ModelCall.objects.get().attempts == 2


def test_no_retry_is_started_when_the_deadline_leaves_no_room_for_it(stub, settings, db):
    settings.BRAIN_LLM_MAX_RETRIES = 3
    # The server asks for a 10 s pause; the caller has 2 s: fail now, with the real reason.
    stub.script(stub_error(429, "rate_limit_error", "Slow down", headers={"retry-after": "10"}))

    started = time.monotonic()
    with pytest.raises(llm.LLMUnavailable, match="Slow down"):
        ask(timeout=2.0)

    assert time.monotonic() - started < 1.5
    assert len(stub.requests) == 1


def test_a_bad_request_is_an_error_that_is_not_worth_retrying(stub, settings, db):
    settings.BRAIN_LLM_MAX_RETRIES = 2
    stub.script(stub_error(400, "invalid_request_error", "max_tokens: must be at most 64000"))

    with pytest.raises(llm.LLMError) as raised:
        ask()

    assert not isinstance(raised.value, llm.LLMUnavailable)
    assert str(raised.value).endswith("max_tokens: must be at most 64000")
    assert len(stub.requests) == 1
    assert ModelCall.objects.get().state == "error"


def test_an_unreachable_api_is_unavailable_and_recorded(settings, db):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.ANTHROPIC_BASE_URL = f"http://127.0.0.1:{port}"
    settings.BRAIN_LLM_MAX_RETRIES = 0
    settings.BRAIN_LLM_MODEL = "claude-test-model"

    with pytest.raises(llm.LLMUnavailable, match="Cannot reach the Anthropic API"):
        ask()

    assert ModelCall.objects.get().state == "error"


def test_the_gateway_is_configured_exactly_when_an_api_key_is_set(settings, db):
    settings.ANTHROPIC_API_KEY = ""
    assert llm.configured() is False
    with pytest.raises(llm.LLMError, match="ANTHROPIC_API_KEY"):
        ask()
    assert not ModelCall.objects.exists()  # nothing was asked, so nothing is recorded

    settings.ANTHROPIC_API_KEY = "test-key"
    assert llm.configured() is True


def test_a_task_asks_exactly_what_complete_asks_with_the_same_words(stub, db):
    task = llm.Task("study", "You answer briefly.", max_tokens=300, timeout=5.0, output=Verdict)
    stub.script(
        stub_json({"answer": "warm", "sure": True}), stub_json({"answer": "warm", "sure": True})
    )

    by_task = task.complete("Is the loft warm?", memory=None)
    by_hand = ask(task="study", output=Verdict)

    first, second = stub.requests
    assert (first.body, first.system, first.prompt) == (second.body, second.system, second.prompt)
    assert by_task.parsed == by_hand.parsed == Verdict(answer="warm", sure=True)
    recorded = [
        ModelCall.objects.values_list("task", "input_bytes", "timeout_s").get(pk=answer.call_id)
        for answer in (by_task, by_hand)
    ]
    assert recorded[0] == recorded[1] and recorded[0][0] == "study"


def test_a_call_of_a_task_may_ask_for_less_time_and_fewer_tokens(stub, db):
    task = llm.Task("brief", "You answer briefly.", max_tokens=300, timeout=5.0)
    stub.script(stub_text("ok"))

    answer = task.complete("Is the loft warm?", memory=None, timeout=2.0, max_tokens=50)

    assert stub.requests[0].body["max_tokens"] == 50
    assert ModelCall.objects.get(pk=answer.call_id).timeout_s == 2.0


def test_a_task_is_configured_as_its_route_is(settings, db):
    task = llm.Task("brief", "You answer briefly.", max_tokens=300, timeout=5.0)

    settings.ANTHROPIC_API_KEY = ""
    assert task.configured(None) is llm.configured(None, "brief") is False
    settings.ANTHROPIC_API_KEY = "test-key"
    assert task.configured(None) is llm.configured(None, "brief") is True


def test_a_task_the_settings_page_does_not_list_cannot_be_declared():
    # Every model call is one of routing.TASKS, so the settings page can route each of them.
    with pytest.raises(ValueError, match=r"'price' is not one brain\.llm\.routing\.TASKS lists"):
        llm.Task("price", "You price things.", max_tokens=300, timeout=5.0)


def test_every_llm_error_message_is_one_line(stub, db):
    stub.script(stub_error(400, "invalid_request_error", "first line\nsecond line"))

    with pytest.raises(llm.LLMError) as raised:
        ask()

    assert "\n" not in str(raised.value)
    assert str(raised.value).endswith("second line")


def test_only_the_provider_module_imports_the_anthropic_sdk():
    root = Path(django_settings.BASE_DIR)
    allowed = {root / "brain" / "llm" / "anthropic_api.py"}
    sources = [*root.glob("*.py")]
    for app in ("brain", "knowledge", "memory", "review"):
        sources += (root / app).rglob("*.py")
    offenders = []
    for path in sources:
        if path in allowed:
            continue
        for line in path.read_text(errors="replace").splitlines():
            words = line.split()
            if words[:2] == ["import", "anthropic"] or words[:2] == ["from", "anthropic"]:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
