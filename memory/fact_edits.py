"""A person changes a fact's words (the admin's Fact page; any surface may call ``edit_fact``).

Nothing is overwritten (``knowledge.models.Fact``): the new words are taught as a new fact
through the write gate — ``memory.actions.learn``, as every write is — and the old fact stops
being used. The gate judges the new words against every live fact except the one being edited,
so an edit may now say what another fact says (that one is strengthened), replace another (it is
retired, and its line leaves the document at the next filing) or need a person (a conflict,
under To settle). The new fact keeps the old one's kind, outcome, subjects and taught
confidence; its support and outcomes start again, because they were evidence for other words.

The edit keeps the fact's citations: the new words cite the very passages the old ones did (and
name the same source), so who may read the fact is unchanged — an edit never moves a fact from
HR's eyes to everyone's.

Every edit is logged in the change log, with undo. When the old fact's line is in the memory
document, one commit replaces that line with the new words — a person's write through
``write_document``, logged as "Edited fact #N: …" — and files the new fact at once. Undoing that
change (wherever the change log is: the Knowledge tab, the admin, the API, the CLI) puts the old
line back, which brings the old fact back and withdraws the new one
(``reconcile_with_document``; a correction or a rule is never withdrawn by a missing line, so
undoing the edit of one leaves the new words live beside the old). A fact whose line is not in
the document (still waiting to be filed, left out for space, or a page's fact that is no one's
line) has its waiting item dropped, the new words wait to be filed like anything taught, and the
edit is logged as a curating change (``memory.curation.log_edit``) whose undo brings the old fact
back as it was and withdraws the new words.

Three steps, because the gate may ask a model and no transaction is held across that:

1. set the old fact aside (forgotten, "being edited"), so the gate does not judge the new words
   against the words they replace;
2. ``learn`` the new words, in its own transaction;
3. under the document's lock, replace the line (or drop the waiting item) and record why the old
   fact is no longer used.

When step 2 refuses (a secret, a lost race), the old fact is put back as it was. A process
killed between the steps leaves the old fact forgotten "while being edited", nothing half-written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from knowledge import actions as knowledge_actions
from knowledge import statements
from knowledge.models import Fact
from knowledge.secret_filter import refuse_secrets
from memory import actions, curation, document, revisions, taught
from memory.composers.base import avoid, is_avoid_line, statement_of
from memory.models import Change, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

BEING_EDITED = "its words were being edited"
_MARKER = re.compile(r"^\s*[-*+]\s+")


class CannotEdit(StateConflict):
    """The fact is not in use, so there are no words in use to change; the message says why."""


def check_words(text: str | None) -> str:
    """The new words as they will be taught, or the ValidationError ``learn`` would refuse them
    with (empty, too long, a secret): a form checks them before anything is set aside."""
    text = taught.clean_fact_text(text)
    refuse_secrets(text)
    return text


@dataclass(frozen=True)
class Edited:
    """What became of an edit: the fact as it was, what the gate made of the new words, and the
    logged change that undoes it (when the old words had a line in the document)."""

    old: Fact
    learned: actions.Learned | None  # None: the words were already these
    change: Change | None = None

    @property
    def fact(self) -> Fact:
        """The fact that says the new words now."""
        return self.learned.fact if self.learned is not None else self.old

    @property
    def message(self) -> str:
        learned = self.learned
        if learned is None:
            return "Nothing changed: those are the words it already has."
        if learned.item is None:
            said = (
                f"Fact #{self.old.pk} now says what fact #{learned.fact.pk} already said: that "
                f"one was strengthened, and #{self.old.pk} is no longer used."
            )
        else:
            said = f"Fact #{self.old.pk} now reads “{learned.fact.text}” (fact #{learned.fact.pk})."
        if self.change is not None and not self.change.curation:
            said += f" Change #{self.change.number} in the log undoes it."
        elif learned.item is not None:
            said += " It waits to be filed."
        if self.change is not None and self.change.curation:
            said += f" Change #{self.change.number} in the log undoes it."
        if learned.superseded is not None:
            said += f" It replaces “{learned.superseded.text}” ({learned.reason})."
        if learned.conflict is not None:
            said += (
                f" It may replace “{learned.conflict.old.text}”: both are kept until you settle "
                f"it under To settle or in Review (conflict #{learned.conflict.pk})."
            )
        return said


def edit_fact(*, fact: Fact, text: str, by=None) -> Edited:
    """Change what ``fact`` says to ``text`` (the steps and what undo does: the module docstring).

    Raises ValidationError (empty, too long, a secret), CannotEdit (the fact is not in use), and
    whatever ``learn`` raises, in which case nothing has changed."""
    text = check_words(text)
    with transaction.atomic():
        old = (
            Fact.objects.as_system("the fact being edited, found for its editor by the surface")
            .select_for_update()
            .select_related("memory")
            .get(pk=fact.pk)
        )
        if not old.is_live:
            raise CannotEdit(
                f"Fact #{old.pk} is not in use ({old.get_status_display()}"
                f"{', replaced' if old.valid_to else ''}): there are no words in use to change. "
                "Restore it first, or teach the new words."
            )
        if old.text == text:
            return Edited(old, None)
        was = old.status
        cited = list(old.passages.order_by("pk"))
        knowledge_actions.forget_fact(fact=old, reason=BEING_EDITED)
    try:
        learned = actions.learn(
            Statement.typed(
                memory=old.memory,
                text=text,
                origin=Origin.CORRECTION,
                confidence=_confidence_word(old.prior),
                by=by,
                subjects=list(old.subjects.all()),
                outcome=old.outcome,
                kind=old.kind,
                source=old.source,
                cites=cited,
            )
        )
    except BaseException:
        Fact.objects.filter(
            pk=old.pk, status=Fact.Status.FORGOTTEN, forgotten_reason=BEING_EDITED
        ).update(status=was, forgotten_at=None, forgotten_reason="")
        raise
    return Edited(old, learned, _settle(old, learned, by, was))


def _confidence_word(prior: float) -> str:
    """The taught confidence as ``learn`` takes it: the nearest of high, medium and low."""
    return min(
        knowledge_actions.CONFIDENCE, key=lambda w: abs(knowledge_actions.CONFIDENCE[w] - prior)
    )


@retry_transaction
def _settle(old: Fact, learned: actions.Learned, by, was: str) -> Change:
    """Step 3: the old words' line becomes the new words' (or goes, when another fact already
    says them), or the old words' waiting item is dropped. Returns the change logged: the
    document's, or a curating change when the old words had no line (``was``: the old fact's
    status, which its undo restores)."""
    memory, now = old.memory, timezone.now()
    with transaction.atomic():
        current = revisions.lock_document(memory)
        lines = current.text.splitlines(keepends=True)
        index = _line_of(lines, old.text)
        change = None
        if index is not None:
            if learned.item is None:
                del lines[index]
            else:
                lines[index] = _reworded(lines[index], learned.fact.text)
            text = "".join(lines)
            if document.size_bytes(text) <= memory.max_bytes:
                _, changes = revisions.write_document(
                    memory=memory,
                    expected_generation=current.generation,
                    text=text,
                    kind=DocumentRevision.Kind.EDIT,
                    by=by,
                    summary=f"Edited fact #{old.pk}: “{document.quote(old.text)}” now reads "
                    f"“{document.quote(learned.fact.text)}”",
                    filed=[learned.fact.pk] if learned.item is not None else [],
                )
                change = changes[0] if changes else None
        if change is not None and learned.item is not None:
            InboxItem.objects.filter(pk=learned.item.pk, state=InboxItem.State.PENDING).update(
                state=InboxItem.State.FILED, settled_at=now
            )
        if change is None:
            InboxItem.objects.filter(fact=old, state=InboxItem.State.PENDING).update(
                state=InboxItem.State.DROPPED, settled_at=now
            )
            if index is not None or old.in_document:  # its line goes at the next filing
                _queue_removal(old, by)
        # Forgotten because its line went: an undo that brings the line back brings it back.
        # (Words that read the same once normalised would bring it back beside the new fact.)
        same_words = statements.normalise(learned.fact.text) == old.normalized
        reason = (
            knowledge_actions.LINE_GONE
            if change is not None and not same_words
            else f"its words were edited: now fact #{learned.fact.pk}"
        )
        Fact.objects.filter(
            pk=old.pk, status=Fact.Status.FORGOTTEN, forgotten_reason=BEING_EDITED
        ).update(forgotten_reason=reason)
        replaced = learned.superseded
        if replaced is not None and replaced.in_document:
            _queue_removal(replaced, by)
        if change is None:
            new = learned.fact if learned.item is not None else None
            change = curation.log_edit(old=old, new=new, was=was, by=by)
    return change


def _queue_removal(fact: Fact, by) -> None:
    actions.add_to_inbox(
        memory=fact.memory,
        text=fact.text,
        origin=Origin.CORRECTION,
        by=by,
        action=InboxItem.Action.FORGET,
    )


def _line_of(lines: list[str], text: str) -> int | None:
    """The index of the document line that states ``text`` (bullet and "Avoid:" aside)."""
    wanted = statements.normalise(statement_of(text))
    for index, line in enumerate(lines):
        stated = line.strip() and not document.is_heading(line)
        if stated and statements.normalise(statement_of(line)) == wanted:
            return index
    return None


def _reworded(line: str, text: str) -> str:
    """``line`` saying ``text``: its bullet, "Avoid:" label and line ending kept."""
    marker = _MARKER.match(line)
    body = avoid(text) if is_avoid_line(line) else text
    ending = line[len(line.rstrip("\r\n")) :]
    return f"{marker.group(0) if marker else ''}{body}{ending}"
