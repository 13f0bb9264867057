"""One consolidation pass, run directly (the worker only calls ``consolidator.execute``)."""

import socket

import pytest

from memory import actions, consolidator, document, revisions
from memory.composers.base import ComposerError, ComposerTimeout, Composition
from memory.models import (
    Change,
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    Origin,
)

SEED_LINES = [
    "“The office” means the upstairs back bedroom, not the study downstairs.",
    "Sarah is a light sleeper. Nothing in the hallway should go above 15% brightness between "
    "23:00 and 06:00.",
    "Heating is an 8 kW air-source heat pump on weather compensation.",
    "The garage fridge is meant to run 24/7. Its draw looking abnormal at 3 am is the defrost "
    "cycle, not a fault.",
    "Never rename an entity_id without asking — several are referenced in a Node-RED flow.",
]


def _queue(home, *texts, origin=Origin.TYPED, action="add"):
    return [actions.add_to_inbox(memory=home, text=t, origin=origin, action=action) for t in texts]


def _pass(home, trigger=ConsolidationRun.Trigger.CLI) -> ConsolidationRun:
    request = consolidator.request_consolidation(memory=home, trigger=trigger, send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


def test_a_pass_files_every_waiting_item_into_the_document_and_logs_each_line(home):
    items = _queue(home, *SEED_LINES)

    run = _pass(home)

    assert run.state == "filed", run.reason
    assert run.outcome.startswith("Filed 5 items.")
    text = _document(home)
    for line in SEED_LINES:
        assert line.rstrip(".") in text
    assert not InboxItem.objects.pending().exists()
    assert {item.run_id for item in InboxItem.objects.filter(pk__in=[i.pk for i in items])} == {
        run.pk
    }
    summaries = list(Change.objects.for_memory(home).values_list("summary", flat=True))
    assert len(summaries) == 5
    assert all(s.startswith("Added under ") for s in summaries)
    revision = DocumentRevision.objects.current(home)
    assert revision.generation == 1
    assert 0 < document.size_bytes(revision.voice) <= 2048


def test_a_newer_contradicting_fact_replaces_the_old_line(home):
    _queue(home, "The bedroom is kept at 19 degrees at night.")
    _pass(home)
    _queue(home, "The bedroom is kept at 21 degrees at night.")

    run = _pass(home)

    text = _document(home)
    assert "21 degrees" in text
    assert "19 degrees" not in text
    assert run.lines_replaced == 1
    assert Change.objects.for_memory(home).newest_first().first().summary.startswith("Replaced")


def test_a_fact_already_known_is_filed_without_a_new_revision(home):
    _queue(home, "The loft is warm.")
    _pass(home)
    _queue(home, "the loft is warm")

    run = _pass(home)

    assert run.state == "filed"
    assert run.reason == "Everything waiting was already in the document."
    assert DocumentRevision.objects.filter(memory=home).count() == 1


def test_forget_removes_the_line_that_says_it(home):
    _queue(home, "The loft is warm.", "The garage freezer is off in winter.")
    _pass(home)
    _queue(home, "the loft is warm", action="forget")

    run = _pass(home)

    assert run.state == "filed", run.reason
    assert "loft" not in _document(home)
    assert "freezer" in _document(home)


def test_items_added_while_the_composer_works_stay_pending_for_the_next_pass(home, scripted):
    _queue(home, "The loft is warm.")

    def compose_while_people_add_more(*, document, candidates, **_):
        _queue(home, *[f"Late fact {n}" for n in range(50)])
        return Composition(document=document + "- The loft is warm.\n", voice="The loft is warm.")

    scripted(compose_while_people_add_more)

    run = _pass(home)

    assert run.state == "filed"
    assert run.items_read == 1
    assert InboxItem.objects.pending().count() == 50
    assert InboxItem.objects.filter(state="filed").count() == 1


def test_an_answer_over_the_cap_is_retried_once_with_the_measured_excess(home, scripted):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    _queue(home, "The loft is warm.")
    too_long = Composition(document="# Memory\n\n" + "- filler line\n" * 200, voice="")
    fits = Composition(document="# Memory\n\n- The loft is warm.\n", voice="The loft is warm.")
    composer = scripted(too_long, fits)

    run = _pass(home)

    assert run.state == "filed"
    excess = document.size_bytes(too_long.document) - 1024
    assert composer.requests[1].feedback == (
        f"drop the oldest and lowest-value facts until it fits — {excess:,} bytes over "
        "memory_max_kb=1"
    )


def test_an_answer_still_over_the_cap_fails_naming_the_limit_and_keeps_the_queue(home, scripted):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    _queue(home, "The loft is warm.")
    too_long = Composition(document="# Memory\n\n" + "- filler line\n" * 200, voice="")
    scripted(too_long, too_long)

    run = _pass(home)

    assert run.state == "failed"
    assert "over its limit of 1 KB after one retry" in run.reason
    assert InboxItem.objects.pending().count() == 1
    assert not DocumentRevision.objects.filter(memory=home).exists()


def test_a_pass_that_would_drop_most_of_the_document_is_refused(home, scripted):
    _queue(home, *SEED_LINES)
    _pass(home)
    before = _document(home)
    _queue(home, "The loft is warm.")
    scripted(Composition(document="# Memory\n\n## Rooms\n\n- The loft is warm.\n", voice="x"))

    run = _pass(home)

    assert run.state == "refused"
    assert "would drop 5 of the 5 content lines (100%)" in run.reason
    assert _document(home) == before
    assert InboxItem.objects.pending().count() == 1


@pytest.mark.parametrize("answer", ["", "# Memory\n\n## House\n", "Unchanged.", "no changes"])
def test_an_empty_template_only_or_unchanged_answer_is_refused(home, scripted, answer):
    _queue(home, "The loft is warm.")
    scripted(Composition(document=answer, voice=""))

    run = _pass(home)

    assert run.state == "refused"
    assert "nothing was written" in run.reason
    assert InboxItem.objects.pending().count() == 1


def test_a_composer_that_declines_keeps_the_queue_and_says_why(home, scripted):
    _queue(home, "The loft is warm.")
    scripted(Composition(document=_document(home), voice="", kept_reason="Two facts disagree."))

    run = _pass(home)

    assert run.state == "kept"
    assert run.outcome == "Kept the queue: Two facts disagree. The 1 waiting stay queued."
    assert InboxItem.objects.pending().count() == 1


def test_a_timeout_is_reported_as_a_timeout_and_writes_nothing(home, scripted):
    _queue(home, "The loft is warm.")
    scripted(ComposerTimeout("read timed out"))

    run = _pass(home)

    assert run.state == "timed_out"
    assert run.reason.startswith("Timed out after 480 s")
    assert InboxItem.objects.pending().count() == 1


def test_a_composer_failure_carries_its_own_last_line(home, scripted):
    _queue(home, "The loft is warm.")
    scripted(ComposerError("Traceback…\noverloaded_error: Overloaded"))

    run = _pass(home)

    assert run.state == "failed"
    assert run.reason == "overloaded_error: Overloaded"


def test_an_edit_made_during_the_pass_wins_and_a_new_pass_is_asked_for(
    home, scripted, django_capture_on_commit_callbacks
):
    _queue(home, "The loft is warm.")

    def someone_edits_meanwhile(*, document, **_):
        revisions.save_user_edit(memory=home, text=document + "- My own line.\n", base_generation=0)
        return Composition(document=document + "- The loft is warm.\n", voice="")

    scripted(someone_edits_meanwhile)

    with django_capture_on_commit_callbacks(execute=True):
        run = _pass(home)

    assert run.state == "failed"
    assert "edited while the pass ran" in run.reason
    assert "My own line." in _document(home)
    assert "loft" not in _document(home)
    assert InboxItem.objects.pending().count() == 1
    retry = ConsolidationRun.objects.running().get()
    assert retry.trigger == ConsolidationRun.Trigger.RETRY


def test_a_second_request_while_a_pass_runs_reports_already_running(home):
    first = consolidator.request_consolidation(memory=home, trigger="manual", send=False)
    second = consolidator.request_consolidation(memory=home, trigger="manual", send=False)

    assert first.started and not second.started
    assert second.run.pk == first.run.pk
    assert second.message == "A pass is already running; it was not started twice."
    assert ConsolidationRun.objects.count() == 1


def test_the_same_start_message_delivered_twice_makes_one_revision(home):
    _queue(home, "The loft is warm.")
    request = consolidator.request_consolidation(memory=home, trigger="manual", send=False)

    consolidator.execute(request.run.pk)
    consolidator.execute(request.run.pk)

    assert DocumentRevision.objects.filter(memory=home).count() == 1
    assert Change.objects.count() == 1


def test_730_passes_with_nothing_new_leave_the_document_byte_identical(home):
    _queue(home, *SEED_LINES)
    _pass(home)
    before = _document(home)

    for _ in range(730):
        _pass(home, trigger=ConsolidationRun.Trigger.DAILY)

    assert _document(home) == before
    assert DocumentRevision.objects.filter(memory=home).count() == 1


def test_learning_off_refuses_to_start_a_pass_and_leaves_memory_untouched(home):
    home.learning = False
    home.save(update_fields=["learning"])

    with pytest.raises(consolidator.LearningOff, match="Learning is switched off"):
        consolidator.request_consolidation(memory=home, trigger="manual")

    assert not ConsolidationRun.objects.exists()


def test_a_run_whose_worker_process_died_is_marked_failed_on_the_next_request(home):
    _queue(home, "The loft is warm.")
    request = consolidator.request_consolidation(memory=home, trigger="manual", send=False)
    ConsolidationRun.objects.filter(pk=request.run.pk).update(
        claimed_at=request.run.started_at, executor=f"{socket.gethostname()}:999999"
    )

    again = consolidator.request_consolidation(memory=home, trigger="manual", send=False)

    lost = ConsolidationRun.objects.get(pk=request.run.pk)
    assert lost.state == "failed"
    assert lost.reason.startswith("The pass was lost: the worker running it stopped")
    assert again.started
    assert InboxItem.objects.pending().count() == 1
