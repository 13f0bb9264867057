"""The memory document's versions: the one commit point, and every write a person makes to the
text (an edit, a clear, an undo). Imports and passes commit through ``write_document`` too.

``write_document`` is the commit point: under a short row lock on the memory it checks that the
document is still at the generation the writer read, then writes the next revision and its change
rows, and makes the facts follow the new text. Nothing holds a lock or a transaction across a
model call.

One rule for a person's change while a pass is filing (web, API, MCP and CLI alike): the
person's change applies at once, and the pass gives way. A person is never refused, and never
kept waiting, because the machine is busy.

- Undo and clear read the document under its lock (``lock_document``), so they apply to the
  document as it is when they commit, whatever a pass filed a moment before. An undo is refused
  (``CannotUndo``) only when the lines it would revert have moved on.
- An edit names the revision it was made on. Made on an older one (a pass filed while the person
  was typing), it is merged line by line with what changed since (``document.merge``); it is
  refused with the document as it is now (``DocumentChanged``: a 409, or the merge view) only
  when both changed the same or neighbouring lines — a conflict in the person's own text, which
  only they can settle.
- A pass composed from the document it read. At its commit ``write_document`` finds the
  document moved on and writes nothing: the items it read stay waiting, the run is settled as
  failed with the reason, and a new pass is asked for at once (``consolidator._retry_later``),
  which composes from the person's version. Nothing is lost either way.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from knowledge import actions as knowledge_actions
from knowledge.models import Memory, name_of
from memory import curation, document
from memory.composers.offline import distil_voice
from memory.models import Change, ConsolidationRun, DocumentRevision


class DocumentChanged(StateConflict):
    """The document moved on since the writer read it; nothing was written. Carries the
    document as it is now, for the person to merge their text into."""

    def __init__(self, current: DocumentRevision):
        self.current = current
        super().__init__(
            f"The memory document changed since you opened it (it is now at revision "
            f"{current.generation}); nothing was saved.",
            current=as_json(current),
        )


class CannotUndo(StateConflict):
    """The change cannot be reverted; the message explains why in words."""


def current_revision(memory: Memory) -> DocumentRevision:
    return DocumentRevision.objects.current(memory)


def as_json(revision: DocumentRevision) -> dict:
    """A revision as the API shows the document (and as a refused edit carries it)."""
    return {
        "text": revision.text,
        "voice": revision.voice,
        "generation": revision.generation,
        "size_bytes": revision.size_bytes,
        "max_bytes": revision.memory.max_bytes,
    }


def lock_document(memory: Memory) -> DocumentRevision:
    """Take the document's lock (until the transaction ends) and read where it is now.

    NO KEY UPDATE: writers of the document still queue here, but the foreign-key checks of a
    fact taught meanwhile (KEY SHARE on this row, at its commit) do not wait on it — that
    teaching may hold a fact row this commit is about to update. Read after the lock, the
    revision is the one the write builds on: a pass that committed while this writer waited is
    in it.
    """
    Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
    return current_revision(memory)


def write_document(
    *,
    memory: Memory,
    expected_generation: int,
    text: str,
    voice: str | None = None,
    kind: str,
    by=None,
    run: ConsolidationRun | None = None,
    summary: str | None = None,
    reverts: Change | None = None,
    filed: Sequence[int] = (),
) -> tuple[DocumentRevision, list[Change]]:
    """The one commit point for the document: the revision and its change rows, or nothing.

    Raises DocumentChanged when the document is no longer at ``expected_generation``. A pass
    logs one change per line it added, removed or replaced; a person's edit, an undo, a clear
    and an import log one change each. ``filed``: the fact ids whose candidates this write
    files. Must be called inside ``transaction.atomic``.
    """
    current = lock_document(memory)
    if current.generation != expected_generation:
        raise DocumentChanged(current)
    revision = DocumentRevision.objects.create(
        memory=memory,
        generation=current.generation + 1,
        text=text,
        voice=distil_voice(text) if voice is None else voice,
        kind=kind,
        author=by,
        run=run,
    )
    groups = document.diff(current.text, text)
    if kind != DocumentRevision.Kind.PASS:
        groups = [[op for group in groups for op in group]] if groups else []
    next_number = (Change.objects.for_memory(memory).aggregate(n=Max("number"))["n"] or 0) + 1
    changes = []
    for offset, operations in enumerate(groups):
        changes.append(
            Change(
                memory=memory,
                number=next_number + offset,
                source=_change_source(kind),
                summary=summary or document.describe(operations, by_person=kind == "edit"),
                operations=[op.as_json() for op in operations],
                revision=revision,
                run=run,
                author=by,
                author_name=name_of(by),
                reverts=reverts,
            )
        )
    Change.objects.bulk_create(changes)
    # Forgetting reaches everything: the facts follow the document. Only a person's write
    # withdraws; a line a pass leaves out (to fit the cap) leaves its fact live.
    knowledge_actions.reconcile_with_document(
        memory=memory, text=text, filed=list(filed), by_person=kind != DocumentRevision.Kind.PASS
    )
    return revision, changes


def _change_source(kind: str) -> str:
    return {
        DocumentRevision.Kind.PASS: Change.Source.PASS,
        DocumentRevision.Kind.EDIT: Change.Source.EDIT,
        DocumentRevision.Kind.UNDO: Change.Source.UNDO,
        DocumentRevision.Kind.CLEAR: Change.Source.CLEAR,
        DocumentRevision.Kind.IMPORT: Change.Source.IMPORT,
    }[DocumentRevision.Kind(kind)]


def check_fits(memory: Memory, text: str) -> None:
    size = document.size_bytes(text)
    if size > memory.max_bytes:
        raise ValidationError(
            f"The document is {size:,} bytes, {size - memory.max_bytes:,} over its limit of "
            f"{memory.memory_max_kb} KB ({memory.max_bytes:,} bytes). Nothing was saved: "
            "shorten it, or raise the limit on the Settings page."
        )


@retry_transaction
def save_user_edit(*, memory: Memory, text: str, base_generation: int, by=None) -> list[Change]:
    """Store a person's edit of the document, made on revision ``base_generation``. Your edits
    are the source of truth; the consolidator merges around them. An edit of an older revision
    is merged with what changed since; raises DocumentChanged (nothing saved) when both changed
    the same lines. Returns the change logged (none if nothing changed)."""
    text = text.replace("\r\n", "\n")
    if text and not text.endswith("\n"):
        text += "\n"
    check_fits(memory, text)
    with transaction.atomic():
        current = lock_document(memory)
        if current.generation != base_generation:
            text = _merged_with_since(memory, current, base_generation, text)
            check_fits(memory, text)
        if current.text == text:
            return []
        _, changes = write_document(
            memory=memory,
            expected_generation=current.generation,
            text=text,
            kind=DocumentRevision.Kind.EDIT,
            by=by,
        )
    return changes


def _merged_with_since(
    memory: Memory, current: DocumentRevision, base_generation: int, text: str
) -> str:
    """An edit made on revision ``base_generation``, with what changed since folded in; or
    DocumentChanged when the same lines changed on both sides (or that revision never was)."""
    base: str | None
    if base_generation == 0:
        base = document.TEMPLATE
    else:
        base = (
            DocumentRevision.objects.filter(memory=memory, generation=base_generation)
            .values_list("text", flat=True)
            .first()
        )
    if base is None or base_generation > current.generation:
        raise DocumentChanged(current)
    try:
        return document.merge(base, text, current.text)
    except document.CannotApply:
        raise DocumentChanged(current) from None


@retry_transaction
def clear_memory(*, memory: Memory, by=None) -> Change | None:
    """Reset the document to the empty template. The old one stays as a revision (like
    memory.md.bak) and the change can be undone."""
    with transaction.atomic():
        current = lock_document(memory)
        if current.text == document.TEMPLATE:
            return None
        _, changes = write_document(
            memory=memory,
            expected_generation=current.generation,
            text=document.TEMPLATE,
            kind=DocumentRevision.Kind.CLEAR,
            by=by,
            summary=f"Cleared the memory document (the old one is kept as revision "
            f"{current.generation})",
        )
    return changes[0] if changes else None


@retry_transaction
def undo_change(*, memory: Memory, number: int, by=None) -> Change:
    """Revert exactly change ``number``, even when later changes happened, and log the undo.

    Raises CannotUndo explaining why when the lines it touched have moved on.
    """
    with transaction.atomic():
        current = lock_document(memory)  # first: the same lock order as a pass's commit
        change = Change.objects.for_memory(memory).select_for_update().filter(number=number).first()
        if change is None:
            raise CannotUndo(f"There is no change #{number} in the log of {memory.name}.")
        if change.undone_by_id:
            undone_by = Change.objects.get(pk=change.undone_by_id)
            raise CannotUndo(f"Change #{number} was already undone by change #{undone_by.number}.")
        if change.curation:  # pages merged or split, a fact edited off the document
            try:
                return curation.undo(change, by=by)
            except curation.CannotReverse as why:
                raise CannotUndo(f"Change #{number} can't be undone: {why.message}") from None
        inverse = [op.inverse() for op in reversed(change.line_operations)]
        try:
            text = document.apply(current.text, inverse)
        except document.CannotApply as why:
            raise CannotUndo(
                f"Change #{number} can't be undone: {why}"
                f"{_later_change_note(change)}. Nothing was changed."
            ) from None
        check_fits(memory, text)
        _, logged = write_document(
            memory=memory,
            expected_generation=current.generation,
            text=text,
            kind=DocumentRevision.Kind.UNDO,
            by=by,
            reverts=change,
            summary=f"Undid change #{number}: {change.summary}",
        )
        undo = logged[0] if logged else None
        if undo is None:  # the inverse changed no byte: still record that it was undone
            raise CannotUndo(f"Change #{number} has nothing left to undo.")
        change.undone_by = undo
        change.save(update_fields=["undone_by"])
    return undo


def _later_change_note(change: Change) -> str:
    later = Change.objects.for_memory(change.memory).filter(number__gt=change.number)
    touched = [
        c.number
        for c in later.order_by("number")
        if {op["line"] for op in c.operations} & {op["line"] for op in change.operations}
    ]
    if not touched:
        return ""
    return f" (change #{touched[0]} changed that line since)"
