"""Curating actions, logged in the change log with undo: merge two pages, split a page, and
the record of a fact's edit when its words had no line in the document (``fact_edits``).

Every surface (the page view, Review, the API, the admin) calls these. Each is one change in
the memory's log (``Change``, source "curation"): the rows it moved are in ``Change.curation``,
and ``revisions.undo_change`` — the undo every surface already has — reverses exactly that,
through ``undo`` here, logging the undo as any other. A curating change touches no line of the
document, so it never stands in the way of undoing a document change, nor one of those in its.

The numbering lock is the one ``revisions.lock_document`` takes (the memory's row, NO KEY
UPDATE), so a curating change and a document change never take the same number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.words import counted
from knowledge import actions as knowledge_actions
from knowledge import page_moves
from knowledge.models import Fact, Memory, Subject, name_of
from knowledge.page_moves import CannotReverse
from memory.models import Change, InboxItem

# Curation changes rows a surface has already found for the person (the page, fact or change
# they may change, read through the read rule there); what it reads to do so it reads whole.
_CURATING = "curating what the person was shown"

MERGE, SPLIT, EDIT = "merge_pages", "split_page", "edit_fact"
EDIT_UNDONE = "its edit was undone"

__all__ = ["CannotReverse", "Curated", "log", "merge_pages", "split_page", "undo"]


@dataclass(frozen=True)
class Curated:
    """What a curating action did, in words, and the change in the log that undoes it."""

    message_done: str
    change: Change
    page: Subject | None = None

    @property
    def message(self) -> str:
        return f"{self.message_done} Change #{self.change.number} in the log undoes it."


def log(*, memory: Memory, summary: str, curation: dict, by=None, reverts=None) -> Change:
    """Write one curating change (or its undo) to the log, numbered after the last. Must be
    called inside the transaction that made the change."""
    Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
    number = (Change.objects.for_memory(memory).aggregate(n=Max("number"))["n"] or 0) + 1
    return Change.objects.create(
        memory=memory,
        number=number,
        source=Change.Source.UNDO if reverts is not None else Change.Source.CURATION,
        summary=summary,
        operations=[],
        curation=curation,
        author=by,
        author_name=name_of(by),
        reverts=reverts,
    )


@retry_transaction
def merge_pages(*, keep: Subject, merged: Subject, by=None) -> Curated:
    """``merged`` becomes part of ``keep`` (``knowledge.page_moves.merge_pages``), logged.
    Raises ``knowledge.actions.CannotMerge`` saying why it cannot."""
    with transaction.atomic():
        done = page_moves.merge_pages(keep=keep, merged=merged)
        change = log(
            memory=done.keep.memory,
            summary=f"Merged page “{done.merged_name}” into “{done.keep.name}”",
            curation={"action": MERGE, **done.undo},
            by=by,
        )
    return Curated(done.message, change, done.keep)


@retry_transaction
def split_page(
    *, page: Subject, facts: Sequence[Fact | int], name: str, kind: str, by=None
) -> Curated:
    """Move ``facts`` off ``page`` onto a new page (``knowledge.page_moves.split_page``), logged.
    Raises ValidationError saying what to choose."""
    with transaction.atomic():
        done = page_moves.split_page(page=page, facts=facts, name=name, kind=kind)
        change = log(
            memory=page.memory,
            summary=f"Split {counted(done.facts, 'fact')} off page "
            f"“{page.name}” onto “{done.new.name}”",
            curation={"action": SPLIT, **done.undo},
            by=by,
        )
    return Curated(done.message, change, done.new)


def log_edit(*, old: Fact, new: Fact | None, was: str, by=None) -> Change:
    """Log a fact's edit whose words had no line in the document (``fact_edits``): undoing it
    brings ``old`` back as it was (``was``: its status) and withdraws ``new`` (None: the new
    words were already another fact's, which stays)."""
    said = f"“{new.text}”" if new is not None else "what another fact says"
    return log(
        memory=old.memory,
        summary=f"Edited fact #{old.pk}: “{old.text}” now reads {said}",
        curation={"action": EDIT, "old": old.pk, "new": new.pk if new else None, "was": was},
        by=by,
    )


def undo(change: Change, *, by=None) -> Change:
    """Reverse curating ``change`` and log the undo. Called by ``revisions.undo_change`` inside
    its transaction, with the change row locked and not undone yet. Raises CannotReverse."""
    data = change.curation
    if data["action"] == MERGE:
        page_moves.unmerge_pages(data)
    elif data["action"] == SPLIT:
        page_moves.unsplit_page(data)
    else:
        _unedit(data)
    undone = log(
        memory=change.memory,
        summary=f"Undid change #{change.number}: {change.summary}",
        curation={},
        by=by,
        reverts=change,
    )
    change.undone_by = undone
    change.save(update_fields=["undone_by"])
    return undone


def _unedit(data: dict) -> None:
    """The old words back as they were; the new words withdrawn (and their waiting item)."""
    old = Fact.objects.as_system(_CURATING).select_for_update().filter(pk=data["old"]).first()
    if old is None or old.status != Fact.Status.FORGOTTEN:
        raise CannotReverse(
            f"Fact #{data['old']} is no longer set aside for its edit: it was restored or "
            "removed since."
        )
    new = (
        Fact.objects.as_system(_CURATING).select_for_update().filter(pk=data["new"]).first()
        if data["new"]
        else None
    )
    if new is not None and new.in_document:
        raise CannotReverse(
            f"The new words (fact #{new.pk}) were filed into the memory document since: undo "
            "that filing's change, or forget the fact."
        )
    now = timezone.now()
    if new is not None:
        knowledge_actions.forget_fact(fact=new, reason=EDIT_UNDONE)
        InboxItem.objects.filter(fact=new, state=InboxItem.State.PENDING).update(
            state=InboxItem.State.DROPPED, settled_at=now
        )
    # What the edit dropped or queued for the old words is put back as it was.
    InboxItem.objects.filter(fact=old, state=InboxItem.State.DROPPED).update(
        state=InboxItem.State.PENDING, settled_at=None
    )
    InboxItem.objects.filter(
        memory=old.memory,
        action=InboxItem.Action.FORGET,
        text=old.text,
        state=InboxItem.State.PENDING,
    ).update(state=InboxItem.State.DROPPED, settled_at=now)
    Fact.objects.filter(pk=old.pk).update(
        status=data["was"], forgotten_at=None, forgotten_reason=""
    )
