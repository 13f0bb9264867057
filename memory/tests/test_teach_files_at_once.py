"""Teach it something merges straight in: the line is filed into the document at once by a pass
of its own, not left for the daily pass; one writer still, so it waits for a pass running."""

from __future__ import annotations

from django.urls import reverse

from memory import actions, consolidator
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

HTMX = {"HX-Request": "true"}


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


def test_a_taught_line_is_in_the_document_at_once_and_nothing_else_is_filed_with_it(
    signed_in, home, django_capture_on_commit_callbacks
):
    earlier = actions.learn(
        Statement.said(memory=home, text="Guests use the loft.", origin=Origin.VOICE)
    )

    with django_capture_on_commit_callbacks() as sent:
        response = signed_in.post(
            reverse("memory:teach"), {"text": "The garage freezer is off in winter."}, headers=HTMX
        )
    run = ConsolidationRun.objects.get()
    consolidator.execute(run.pk)  # what the worker does with the message sent

    body = response.content.decode()
    assert len(sent) == 1  # the pass's start message (the fact's event is in its transaction)
    assert "Filing it into the document now." in body
    assert f'hx-get="{reverse("memory:banner", args=[run.pk])}"' in body  # the banner shows it
    assert run.trigger == ConsolidationRun.Trigger.TEACH
    run.refresh_from_db()
    assert run.state == "filed" and run.items_read == 1
    assert "The garage freezer is off in winter." in _document(home)
    assert "Guests use the loft." not in _document(home)  # the daily pass files that one
    assert InboxItem.objects.get(pk=earlier.item.pk).state == InboxItem.State.PENDING


def test_while_a_pass_runs_the_taught_line_waits_its_turn_and_the_box_says_so(
    signed_in, home, django_capture_on_commit_callbacks
):
    actions.learn(Statement.said(memory=home, text="Guests use the loft.", origin=Origin.VOICE))
    running = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run

    with django_capture_on_commit_callbacks():
        response = signed_in.post(
            reverse("memory:teach"), {"text": "The garage freezer is off in winter."}, headers=HTMX
        )
    assert "filed into the document as soon as it finishes" in response.content.decode()
    assert ConsolidationRun.objects.count() == 1  # one writer

    consolidator.execute(running.pk)  # the running pass ends (it read the queue late: both)
    assert "The garage freezer is off in winter." in _document(home)
    assert ConsolidationRun.objects.count() == 1  # nothing left to file at once


def test_a_line_taught_after_a_pass_read_the_queue_gets_a_pass_when_it_ends(
    home, scripted, django_capture_on_commit_callbacks
):
    from memory.composers.base import Request
    from memory.composers.offline import OfflineComposer

    actions.learn(Statement.said(memory=home, text="Guests use the loft.", origin=Origin.VOICE))
    running = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    said = []

    def compose_while_someone_teaches(**request):
        taught = actions.learn(
            Statement.typed(memory=home, text="The hall is cold.", origin=Origin.TYPED)
        )
        said.append(consolidator.file_at_once(item=taught.item).message)
        return OfflineComposer().compose(Request(**request))

    scripted(compose_while_someone_teaches, OfflineComposer())
    with django_capture_on_commit_callbacks() as sent:
        consolidator.execute(running.pk)

    assert "as soon as it finishes" in said[0]
    assert "The hall is cold." not in _document(home)  # the pass had read the queue before
    follow_up = ConsolidationRun.objects.exclude(pk=running.pk).get()
    assert follow_up.trigger == ConsolidationRun.Trigger.TEACH and sent
    consolidator.execute(follow_up.pk)
    assert "The hall is cold." in _document(home)


def test_with_learning_off_a_taught_line_waits_in_the_queue_and_says_why(signed_in, home):
    home.learning = False
    home.save(update_fields=["learning"])

    response = signed_in.post(reverse("memory:teach"), {"text": "The loft is warm."}, headers=HTMX)

    assert "Learning is switched off, so it waits in the queue" in response.content.decode()
    assert not ConsolidationRun.objects.exists()
    assert InboxItem.objects.pending().count() == 1


def test_a_failed_pass_of_its_own_is_not_asked_again_in_a_loop(
    home, scripted, django_capture_on_commit_callbacks
):
    from memory.composers.base import ComposerError

    scripted(ComposerError("Overloaded"))
    taught = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    )
    with django_capture_on_commit_callbacks():
        request = consolidator.file_at_once(item=taught.item).request

    consolidator.execute(request.run.pk)

    request.run.refresh_from_db()
    assert request.run.state == "failed"
    assert ConsolidationRun.objects.count() == 1  # the sweep retries it, with pauses
