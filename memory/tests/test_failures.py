"""A failure is filed as something to avoid, never as advice: under its own heading in the
document, left out of the voice distillate, and still known as the line of its fact."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from brain.tests.stubs.messages import stub_json
from knowledge import retrieval
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator, document, revisions
from memory.composers.base import FAILURES_HEADING, Candidate, Composition, Request
from memory.composers.offline import OfflineComposer, distil_voice
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

FAILURE = "Setting the thermostat to 30 warms the nursery fast."
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _pass(home) -> ConsolidationRun:
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


def _under(text: str, heading: str) -> list[str]:
    """The non-blank lines under ``## heading``."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
        elif inside and line.strip():
            lines.append(line)
    return lines


def _plain_lines_about(text: str, word: str) -> list[str]:
    """Content lines mentioning ``word`` that are not under the failures heading."""
    failures = set(_under(text, FAILURES_HEADING))
    return [
        line
        for line in text.splitlines()
        if word in line and line not in failures and not document.is_heading(line)
    ]


def _candidate(id: int, text: str, *, valence: str = "fact", action: str = "add") -> Candidate:
    return Candidate(
        id=id,
        text=text,
        origin="api",
        confidence="medium",
        created_at=START + timedelta(minutes=id),
        action=action,
        valence=valence,
        outcome=False if valence == "failure" else None,
    )


# The whole way through, with the offline composer ----------------------------------------------


def test_a_failure_taught_with_outcome_false_is_filed_as_something_to_avoid(home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    failure = actions.learn(
        Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False)
    ).fact

    run = _pass(home)

    assert run.state == "filed", run.reason
    text = _document(home)
    assert _under(text, FAILURES_HEADING) == [f"- Avoid: {FAILURE}"]
    assert _plain_lines_about(text, "thermostat") == []
    failure.refresh_from_db()
    assert (failure.status, failure.in_document) == ("filed", True)


def test_the_voice_distillate_never_states_a_failure_as_advice(home):
    actions.learn(
        Statement.typed(
            memory=home, text="Sarah likes the bedroom at 19 degrees.", origin=Origin.TYPED
        )
    )
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))

    _pass(home)

    voice = DocumentRevision.objects.current(home).voice
    assert "Sarah likes the bedroom at 19 degrees." in voice
    assert "thermostat" not in voice


def test_a_failure_that_already_says_avoid_is_not_prefixed_twice(home):
    actions.learn(
        Statement.typed(
            memory=home,
            text="Avoid: running the dishwasher during the heat pump's defrost cycle.",
            origin=Origin.API,
            outcome=False,
        )
    )

    _pass(home)

    text = _document(home)
    assert _under(text, FAILURES_HEADING) == [
        "- Avoid: Running the dishwasher during the heat pump's defrost cycle."
    ]
    assert "Avoid: Avoid" not in text


def test_context_and_the_document_agree_that_it_is_something_to_avoid(home):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    _pass(home)

    recalled = retrieval.context(memory=home, question="thermostat nursery", reader=SYSTEM).text

    assert f"Avoid: {FAILURE}" in recalled
    assert f"- Avoid: {FAILURE}" in _document(home)


def test_deleting_the_avoid_line_by_hand_forgets_the_failure(home):
    failure = actions.learn(
        Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False)
    ).fact
    _pass(home)
    current = DocumentRevision.objects.current(home)

    revisions.save_user_edit(
        memory=home,
        text=current.text.replace(f"- Avoid: {FAILURE}\n", ""),
        base_generation=current.generation,
    )

    failure.refresh_from_db()
    assert failure.status == "forgotten"
    assert failure not in Fact.objects.live()


def test_forgetting_a_failure_removes_its_avoid_line_at_the_next_pass(home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    failure = actions.learn(
        Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False)
    ).fact
    _pass(home)

    actions.forget(fact=failure)
    run = _pass(home)

    assert run.state == "filed", run.reason
    assert "thermostat" not in _document(home)
    assert "The loft is warm." in _document(home)


# The offline composer --------------------------------------------------------------------------


def test_the_offline_composer_files_a_failure_under_its_own_heading_last():
    result = OfflineComposer().compose(
        Request(
            document=document.TEMPLATE,
            candidates=[
                _candidate(1, FAILURE, valence="failure"),
                _candidate(2, "The loft is warm."),
            ],
            max_bytes=32 * 1024,
        )
    )

    assert _under(result.document, FAILURES_HEADING) == [f"- Avoid: {FAILURE}"]
    assert result.document.rstrip("\n").endswith(f"## {FAILURES_HEADING}\n- Avoid: {FAILURE}")
    assert "- The loft is warm." in _under(result.document, "Rooms")
    assert "thermostat" not in result.voice


def test_a_failure_takes_the_place_of_the_advice_it_was_written_as():
    """A document written before failures had a heading states one as advice; filing the failure
    again moves it where it belongs."""
    old = document.TEMPLATE.replace("## Devices\n", f"## Devices\n- {FAILURE}\n")

    result = OfflineComposer().compose(
        Request(
            document=old,
            candidates=[_candidate(1, FAILURE, valence="failure")],
            max_bytes=32 * 1024,
        )
    )

    assert _under(result.document, FAILURES_HEADING) == [f"- Avoid: {FAILURE}"]
    assert _plain_lines_about(result.document, "thermostat") == []


def test_the_same_failure_twice_is_one_avoid_line():
    first = OfflineComposer().compose(
        Request(
            document=document.TEMPLATE,
            candidates=[_candidate(1, FAILURE, valence="failure")],
            max_bytes=32 * 1024,
        )
    )

    again = OfflineComposer().compose(
        Request(
            document=first.document,
            candidates=[_candidate(2, FAILURE.lower(), valence="failure")],
            max_bytes=32 * 1024,
        )
    )

    assert _under(again.document, FAILURES_HEADING) == [f"- Avoid: {FAILURE}"]


def test_a_failure_worded_as_avoid_something_gets_the_label_once():
    result = OfflineComposer().compose(
        Request(
            document=document.TEMPLATE,
            candidates=[
                _candidate(1, "avoid running the tumble dryer overnight", valence="failure")
            ],
            max_bytes=32 * 1024,
        )
    )

    assert _under(result.document, FAILURES_HEADING) == [
        "- Avoid: Running the tumble dryer overnight."
    ]


def test_distil_voice_leaves_the_failures_out():
    text = (
        "# Memory\n\n## Preferences\n- Sarah likes the bedroom at 19 degrees.\n\n"
        f"## {FAILURES_HEADING}\n- Avoid: {FAILURE}\n"
    )

    assert distil_voice(text) == "- Sarah likes the bedroom at 19 degrees.\n"


# What the consolidator enforces, whatever the composer -------------------------------------------


def test_a_pass_that_writes_a_failure_as_plain_advice_is_refused(home, scripted):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    scripted(Composition(document=document.TEMPLATE + f"- {FAILURE}\n", voice=""))

    run = _pass(home)

    assert run.state == "refused"
    assert f"“{FAILURE}”" in run.reason
    assert FAILURES_HEADING in run.reason
    assert DocumentRevision.objects.filter(memory=home).count() == 0
    assert InboxItem.objects.pending().count() == 1


def test_a_failure_under_its_heading_without_avoid_is_refused_too(home, scripted):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    unlabelled = document.TEMPLATE + f"\n## {FAILURES_HEADING}\n- {FAILURE}\n"
    scripted(Composition(document=unlabelled, voice=""))

    run = _pass(home)

    assert run.state == "refused"
    assert "as plain advice" in run.reason


def test_avoid_written_twice_is_refused(home, scripted):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    doubled = document.TEMPLATE + f"\n## {FAILURES_HEADING}\n- Avoid: Avoid: {FAILURE}\n"
    scripted(Composition(document=doubled, voice=""))

    run = _pass(home)

    assert run.state == "refused"
    assert "twice" in run.reason


def test_a_voice_that_states_a_failure_is_replaced_by_one_distilled_from_the_document(
    home, scripted
):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    written = (
        document.TEMPLATE.replace("## Rooms\n", "## Rooms\n- The loft is warm.\n")
        + f"\n## {FAILURES_HEADING}\n- Avoid: {FAILURE}\n"
    )
    scripted(Composition(document=written, voice=f"{FAILURE}\nThe loft is warm."))

    run = _pass(home)

    assert run.state == "filed", run.reason
    voice = DocumentRevision.objects.current(home).voice
    assert "thermostat" not in voice
    assert "The loft is warm." in voice


# The Claude composer, through the real SDK against the stub --------------------------------------


@pytest.fixture
def claude(llm_stub, settings):
    settings.BRAIN_LLM_MODEL = "claude-test-model"
    return llm_stub


def _answer(text: str, voice: str = "The loft is warm."):
    return stub_json({"decision": "write", "reason": "Filed.", "document": text, "voice": voice})


def test_claude_is_told_where_failures_go_and_which_candidates_are_failures(home, claude):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    written = (
        document.TEMPLATE.replace("## Rooms\n", "## Rooms\n- The loft is warm.\n")
        + f"\n## {FAILURES_HEADING}\n- Avoid: {FAILURE}\n"
    )
    claude.script(_answer(written))

    run = _pass(home)

    assert run.state == "filed", run.reason
    request = claude.requests[0]
    assert f"## {FAILURES_HEADING}" in request.system
    assert '"Avoid: "' in request.system
    sent = [json.loads(line) for line in request.prompt.splitlines() if line.startswith('{"id"')]
    by_text = {item["text"]: item for item in sent}
    assert (by_text[FAILURE]["valence"], by_text[FAILURE]["outcome"]) == ("failure", False)
    loft = by_text["The loft is warm."]
    assert (loft["valence"], loft["outcome"]) == ("fact", None)
    failure = Fact.objects.get(text=FAILURE)
    assert failure.in_document


def test_claude_writing_a_failure_as_advice_is_refused_and_the_queue_kept(home, claude):
    actions.learn(Statement.typed(memory=home, text=FAILURE, origin=Origin.API, outcome=False))
    claude.script(_answer(document.TEMPLATE.replace("## Devices\n", f"## Devices\n- {FAILURE}\n")))

    run = _pass(home)

    assert run.state == "refused"
    assert "as plain advice" in run.reason
    assert InboxItem.objects.pending().count() == 1
    assert not DocumentRevision.objects.filter(memory=home).exists()
