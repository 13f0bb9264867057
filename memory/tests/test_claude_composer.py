"""The Anthropic composer, driven through the real SDK against the Messages API stub."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from brain.models import ModelCall
from brain.tests.stubs.messages import stub_hang, stub_json, stub_overloaded, stub_text
from memory.composers import get_composer
from memory.composers.base import (
    VOICE_MAX_BYTES,
    Candidate,
    ComposerError,
    ComposerTimeout,
    ComposerUnavailable,
    Request,
)
from memory.composers.claude import ClaudeComposer, fit_voice

DOCUMENT = """# Memory

## Rooms
- "The office" means the upstairs back bedroom, not the study downstairs.

## Rules
- Never rename an entity_id without asking.
"""

NEW_DOCUMENT = DOCUMENT + "\n## Preferences\n- Sarah likes the bedroom at 19 °C.\n"


@pytest.fixture
def stub(llm_stub, settings):
    settings.BRAIN_LLM_MODEL = "claude-test-model"
    return llm_stub


def candidate(id: int, text: str, **fields) -> Candidate:
    values = {
        "origin": "typed",
        "confidence": "high",
        "created_at": datetime(2026, 11, 28, 9, id, tzinfo=UTC),
        "taught_by": "sarah",
    }
    return Candidate(id=id, text=text, **{**values, **fields})


def compose(*, timeout: float = 5.0, **overrides):
    request = Request(
        document=DOCUMENT,
        candidates=[candidate(1, "Sarah likes the bedroom at 19 °C")],
        max_bytes=32 * 1024,
    )
    return ClaudeComposer().compose(replace(request, **overrides), timeout=timeout)


def write(document: str = NEW_DOCUMENT, voice: str = "The office is the back bedroom.", **extra):
    return stub_json(
        {
            "decision": "write",
            "reason": "Filed Sarah's preference.",
            "document": document,
            "voice": voice,
            **extra,
        }
    )


def test_a_good_answer_gives_the_new_document_and_voice(stub, db):
    stub.script(write())

    composition = compose()

    assert composition.document == NEW_DOCUMENT
    assert composition.voice == "The office is the back bedroom."
    assert composition.kept_reason is None
    assert composition.notes[0] == "wrote: Filed Sarah's preference."
    call = ModelCall.objects.get()
    assert (call.task, call.state) == ("consolidate", "ok")
    assert f"model call #{call.pk}" in composition.notes


def test_the_request_carries_the_model_from_settings_and_a_max_tokens(stub, db):
    stub.script(write())

    compose(max_bytes=32 * 1024)

    body = stub.requests[0].body
    assert body["model"] == "claude-test-model"
    assert 10_000 < body["max_tokens"] <= 64_000


def test_the_prompt_carries_the_document_the_cap_and_every_candidate_in_full(stub, db):
    stub.script(write())
    forget = candidate(2, "The loft is warm", action="forget", origin="terminal", taught_by="tom")

    compose(candidates=[forget, candidate(1, "Sarah likes the bedroom at 19 °C")], max_bytes=4096)

    request = stub.requests[0]
    assert DOCUMENT.rstrip("\n") in request.prompt
    assert "at most 4096 bytes" in request.prompt
    sent = [json.loads(line) for line in request.prompt.splitlines() if line.startswith('{"id"')]
    assert sent == [  # oldest first
        {
            "id": 1,
            "action": "add",
            "text": "Sarah likes the bedroom at 19 °C",
            "valence": "fact",
            "outcome": None,
            "origin": "typed",
            "confidence": "high",
            "date": "2026-11-28T09:01+00:00",
            "taught_by": "sarah",
        },
        {
            "id": 2,
            "action": "forget",
            "text": "The loft is warm",
            "valence": "fact",
            "outcome": None,
            "origin": "terminal",
            "confidence": "high",
            "date": "2026-11-28T09:02+00:00",
            "taught_by": "tom",
        },
    ]
    for rule in ("newest wins", "source of truth", '"forget"', "Rules", "2048 bytes"):
        assert rule in request.system


def test_keep_is_reported_with_its_reason_and_the_document_comes_back_unchanged(stub, db):
    stub.script(stub_json({"decision": "keep", "reason": "Two candidates disagree on the loft."}))

    composition = compose()

    assert composition.document == DOCUMENT
    assert composition.kept_reason == "Two candidates disagree on the loft."
    assert composition.notes[0] == "kept: Two candidates disagree on the loft."


def test_the_retry_prompt_carries_the_feedback_verbatim(stub, db):
    stub.script(write())
    feedback = "Your document is 35000 bytes, 2232 over memory_max_kb=32: drop the oldest facts."

    compose(feedback=feedback)

    assert feedback in stub.requests[0].prompt


def test_a_first_prompt_carries_no_feedback(stub, db):
    stub.script(write())

    compose()

    assert "Feedback" not in stub.requests[0].prompt


def test_a_document_over_the_cap_is_returned_whole_for_the_consolidator_to_measure(stub, db):
    too_long = DOCUMENT + "".join(f"- Fact number {n} about the house.\n" for n in range(200))
    stub.script(write(document=too_long))

    composition = compose(max_bytes=1024)

    assert composition.document == too_long
    assert len(composition.document.encode()) > 1024


def test_a_voice_over_2_kb_is_trimmed_at_a_line_boundary(stub, db):
    lines = [f"Line {n}: the hallway stays below fifteen percent at night." for n in range(60)]
    stub.script(write(voice="\n".join(lines)))

    voice = compose().voice

    assert len(voice.encode()) <= VOICE_MAX_BYTES
    assert voice.splitlines() == lines[: len(voice.splitlines())]
    assert len(voice.splitlines()) > 30


def test_a_single_line_voice_over_the_limit_is_cut_between_words():
    voice = fit_voice("word " * 1000)

    assert len(voice.encode()) <= VOICE_MAX_BYTES
    assert set(voice.split()) == {"word"}
    assert not voice.endswith(" ")


def test_a_hanging_model_is_a_composer_timeout(stub, db):
    stub.script(stub_hang(30))

    with pytest.raises(ComposerTimeout, match="timed out"):
        compose(timeout=1.0)

    assert ModelCall.objects.get().state == "timeout"


def test_an_overloaded_model_is_composer_unavailable(stub, db):
    stub.script(stub_overloaded())

    with pytest.raises(ComposerUnavailable, match="Overloaded"):
        compose()


def test_garbage_is_a_composer_error_quoting_the_models_last_line(stub, db):
    stub.script(stub_text("Let me think about this.\nI cannot produce the document."))

    with pytest.raises(ComposerError, match="I cannot produce the document") as raised:
        compose()

    assert not isinstance(raised.value, ComposerUnavailable | ComposerTimeout)
    assert ModelCall.objects.get().state == "invalid"


def test_a_write_without_a_document_is_a_composer_error(stub, db):
    stub.script(stub_json({"decision": "write", "reason": "done"}))

    with pytest.raises(ComposerError, match="document"):
        compose()


def test_get_composer_is_claude_when_an_api_key_is_set(settings):
    settings.ANTHROPIC_API_KEY = "test-key"

    assert isinstance(get_composer(), ClaudeComposer)
    assert get_composer().name == "anthropic"


def test_get_composer_is_the_offline_composer_without_an_api_key(settings):
    offline = pytest.importorskip("memory.composers.offline")
    settings.ANTHROPIC_API_KEY = ""

    assert isinstance(get_composer(), offline.OfflineComposer)
