"""Writes to the memory document and its queue. Every surface (web, CLI, API, MCP, tasks)
calls these.

The document has one commit point, ``write_document``: under a short row lock on the memory it
checks that the document is still at the generation the writer read, then writes the next
revision and its change rows. Nothing holds a lock or a transaction across a model call.

One rule for a person's change while a pass is filing (web, API, MCP and CLI alike): the
person's change applies at once, and the pass gives way. A person is never refused, and never
kept waiting, because the machine is busy.

- Undo, clear and forget read the document under its lock (``lock_document``), so they apply
  to the document as it is when they commit, whatever a pass filed a moment before. An undo is
  refused (``CannotUndo``) only when the lines it would revert have moved on.
- An edit names the revision it was made on. Made on an older one (a pass filed while the person
  was typing), it is merged line by line with what changed since (``document.merge``); it is
  refused with the document as it is now (``DocumentChanged``: a 409, or the merge view) only
  when both changed the same or neighbouring lines — a conflict in the person's own text, which
  only they can settle.
- A pass composed from the document it read. At its commit ``write_document`` finds the
  document moved on and writes nothing: the items it read stay waiting, the run is settled as
  failed with the reason, and a new pass is asked for at once (``consolidator._retry_later``),
  which composes from the person's version. Nothing is lost either way.
- A forget or a drop of an item the pass read makes its commit write nothing too (the item is
  no longer pending), and the next pass files the rest without it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from brain.db.retry import retry_transaction
from knowledge import actions as knowledge_actions
from knowledge import episodes as knowledge_episodes
from knowledge import gate, kinds, statements
from knowledge.embedding import get_embedder
from knowledge.models import Conflict, Episode, Fact, Memory, Source
from knowledge.secret_filter import secret_in
from knowledge.subjects import mentioned_in
from knowledge.subjects import resolve as resolve_subjects
from memory import document
from memory.composers.offline import distil_voice
from memory.models import (
    Change,
    Confidence,
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    Origin,
)

MAX_ITEM_CHARS = 1000  # a fact is a sentence or two, not a document
EARLY_FILING_AT = 20  # pending items that start a pass without waiting for the daily one


class DocumentChanged(Exception):
    """The document moved on since the writer read it; nothing was written."""

    def __init__(self, current: DocumentRevision):
        self.current = current
        super().__init__(
            f"The memory document changed since you opened it (it is now at revision "
            f"{current.generation}); nothing was saved."
        )


class LearningOff(Exception):
    def __init__(self, memory: Memory):
        super().__init__(
            f"Learning is switched off for {memory.name}: nothing is filed until it is back on."
        )


class CannotUndo(Exception):
    """The change cannot be reverted; the message explains why in words."""


def _person_name(user) -> str:
    return user.get_username() if user is not None else ""


# The inbox -----------------------------------------------------------------------------------


def clean_fact_text(text: str | None) -> str:
    """The text of a fact as it will be stored, or ValidationError naming the limit."""
    text = " ".join((text or "").split())
    if not text:
        raise ValidationError("A fact can't be empty: say what brain should remember.")
    if len(text) > MAX_ITEM_CHARS:
        raise ValidationError(
            f"That fact is {len(text):,} characters; the limit is {MAX_ITEM_CHARS:,}. "
            "Say it in a sentence or two."
        )
    return text


def _check_origin_and_confidence(origin: str, confidence: str) -> None:
    if origin not in Origin.values:
        raise ValidationError(f"Unknown origin {origin!r}: use one of {', '.join(Origin.values)}.")
    if confidence not in Confidence.values:
        raise ValidationError(f"Confidence must be high, medium or low, not {confidence!r}.")


def add_to_inbox(
    *,
    memory: Memory,
    text: str,
    origin: str,
    confidence: str = Confidence.MEDIUM,
    by=None,
    action: str = InboxItem.Action.ADD,
    fact: Fact | None = None,
    outcome: bool | None = None,
) -> InboxItem:
    """Queue a candidate. Early filing starts when the queue reaches EARLY_FILING_AT.

    Surfaces that teach a fact call ``learn`` (the gate and the fact row); this is the queue
    write underneath it, and what "forget" uses. ``outcome`` False makes it a failure (valence
    "failure", as ``file_fact`` decides it), which a pass files as something to avoid.
    """
    text = clean_fact_text(text)
    _check_origin_and_confidence(origin, confidence)
    item = InboxItem.objects.create(
        memory=memory,
        text=text,
        origin=origin,
        confidence=confidence,
        action=action,
        taught_by=by,
        taught_by_name=_person_name(by),
        fact=fact,
        outcome=outcome,
        valence=Fact.Valence.FAILURE if outcome is False else Fact.Valence.FACT,
    )
    if (
        memory.learning
        and InboxItem.objects.for_memory(memory).pending().count() >= EARLY_FILING_AT
    ):
        transaction.on_commit(lambda: request_if_learning(memory, ConsolidationRun.Trigger.EARLY))
    return item


@dataclass(frozen=True)
class Learned:
    """What the gate decided about a taught statement, and what was done about it."""

    verdict: str  # novel | same | refinement | contradiction | conflict | different_outcome
    fact: Fact
    item: InboxItem | None  # None when it only strengthened a fact already known
    reason: str
    superseded: Fact | None = None
    conflict: Conflict | None = None
    earlier: Fact | None = None  # different_outcome: the fact said before
    caught: tuple[Episode, ...] = ()  # waiting episodes that said the same, distilled into it

    @property
    def message(self) -> str:
        return self._message + self._caught_note

    @property
    def _caught_note(self) -> str:
        if not self.caught:
            return ""
        ids = " and ".join(f"#{episode.pk}" for episode in self.caught)
        return f" Episode {ids}, waiting to be distilled, said the same: the fact cites it."

    @property
    def _message(self) -> str:
        if self.verdict == "same":
            return (
                f"Already known (fact #{self.fact.pk}, now said {self.fact.support} times); "
                "nothing new was queued."
            )
        queued = f"Queued #{self.item.pk}: {self.fact.text}"
        if self.superseded is not None:
            return f"{queued} (it replaces “{self.superseded.text}”: {self.reason})"
        if self.conflict is not None:
            return (
                f"{queued} It may replace “{self.conflict.old.text}” ({self.reason}); both are "
                f"kept until you settle it under To settle (conflict #{self.conflict.pk})."
            )
        if self.earlier is not None:
            if self.fact.valence == Fact.Valence.FAILURE:
                return (
                    f"Stored as a failure (fact #{self.fact.pk}): it was said before as "
                    f"working (fact #{self.earlier.pk}), and this time it did not work."
                )
            return (
                f"Stored as a success (fact #{self.fact.pk}): it failed before (fact "
                f"#{self.earlier.pk}), and this time it worked."
            )
        return queued


@retry_transaction
def learn(
    *,
    memory: Memory,
    text: str,
    origin: str,
    confidence: str = Confidence.MEDIUM,
    by=None,
    subjects: list = (),
    outcome: bool | None = None,
    verdict: str | None = None,
    target: int | None = None,
    source: Source | None = None,
    kind: str | None = None,
    evidence: Sequence[Episode] = (),
) -> Learned:
    """Teach brain one statement, from any surface: the secret filter, the write gate, then a
    fact row (queued) and its inbox item — or, when it is already known, more support.

    ``evidence``: the episodes the statement was distilled from (the sleep pass, an agent's
    own distillation, ``memory_write``); the fact cites each and is valid from the first. The
    caller claims them. Episodes still waiting that say the same (``gate.pending_twins``) are
    claimed here and cited too, so a duplicate is caught before any sleep pass has run.

    Raises ValidationError (empty, too long, a secret), UnknownSubject, or gate.BadVerdict.
    Two identical statements taught at the same moment make one fact with support 2.
    """
    text = clean_fact_text(text)
    _check_origin_and_confidence(origin, confidence)
    secret = secret_in(text)
    if secret:
        raise ValidationError(
            f"That looks like {secret}. brain does not keep secrets: memory is replayed into "
            "prompts, so a secret stored once would be repeated for ever."
        )
    about = resolve_subjects(memory, list(subjects))
    about += [s for s in mentioned_in(memory, text) if s not in about]
    embedder = get_embedder()
    embedding = embedder.embed_one(text)
    speaker = _person_name(by)
    if verdict:
        judgement = gate.from_agent(memory, verdict, target, outcome=outcome)
    elif gate.model_judging():
        judgement = gate.judge_with_model(
            memory, text, outcome=outcome, embedding=embedding, speaker=speaker
        )
    else:
        judgement = gate.judge(memory, text, outcome=outcome, embedding=embedding, speaker=speaker)
    twins = gate.pending_twins(
        memory,
        text,
        outcome=outcome,
        embedding=embedding,
        speaker=speaker,
        exclude=[episode.pk for episode in evidence],
    )
    with transaction.atomic():
        normalized = statements.normalise(text)
        _lock(memory, normalized)
        caught = knowledge_episodes.claim(twins)
        cited = [*evidence, *knowledge_episodes.with_restatements(caught)]
        if judgement.verdict == "novel":
            twin = _twin(memory, normalized, text, speaker)
            if twin is not None:  # taught a moment ago by someone else
                judgement = gate.Judgement("same", twin, "said at the same moment")
        if source is None:
            source = _source_for(memory, text, origin, by)
        if judgement.verdict == "same":
            fact = knowledge_actions.strengthen(
                fact=judgement.target,
                text=text,
                by=by,
                channel=_channel(origin),
                source=source,
                outcome=outcome,
                evidence=cited,
                stated=not evidence,
            )
            return Learned("same", fact, None, judgement.reason, caught=tuple(caught))
        fact = knowledge_actions.file_fact(
            memory=memory,
            text=text,
            channel=_channel(origin),
            kind=kind or kinds.kind_for(text, correction=origin == Origin.CORRECTION),
            confidence=confidence,
            by=by,
            source=source,
            subjects=about,
            outcome=outcome,
            embedding=embedding,
            embedder=embedder.name,
            evidence=cited,
            stated=not evidence,
        )
        superseded = conflict = earlier = None
        if judgement.verdict in ("contradiction", "refinement"):
            knowledge_actions.supersede(old=judgement.target, new=fact)
            superseded = judgement.target
        elif judgement.verdict == "conflict":
            conflict = knowledge_actions.open_conflict(
                old=judgement.target, new=fact, reason=judgement.reason
            )
        elif judgement.verdict == "different_outcome":
            earlier = judgement.target
        item = add_to_inbox(
            memory=memory,
            text=text,
            origin=origin,
            confidence=confidence,
            by=by,
            fact=fact,
            outcome=outcome,
        )
    return Learned(
        judgement.verdict,
        fact,
        item,
        judgement.reason,
        superseded,
        conflict,
        earlier,
        caught=tuple(caught),
    )


def _twin(memory: Memory, normalized: str, text: str, speaker: str) -> Fact | None:
    """A live fact with the very same words that says the same thing (a first-person
    statement by someone else says something else: "I like it at 19", by Sarah or by Tom)."""
    for fact in Fact.objects.for_memory(memory).live().filter(normalized=normalized)[:5]:
        said = gate.relate(gate.Said(fact.text, fact.taught_by_name), gate.Said(text, speaker))
        if said.verdict == "same":
            return fact
    return None


_SOURCE_KINDS = {
    Origin.VOICE: Source.Kind.CONVERSATION,
    Origin.CHAT: Source.Kind.CONVERSATION,
    Origin.TERMINAL: Source.Kind.TERMINAL,
    Origin.TYPED: Source.Kind.TYPED,
    Origin.CORRECTION: Source.Kind.TYPED,
    Origin.INSIGHT: Source.Kind.INSIGHT,
    Origin.STUDY: Source.Kind.STUDY,
    Origin.IMPORT: Source.Kind.IMPORT,
    Origin.API: Source.Kind.API,
}


def _source_for(memory: Memory, text: str, origin: str, by) -> Source:
    """Where a statement taught with no conversation or run came from: the moment itself, so
    "why does brain think that?" always has something to open."""
    when = timezone.localtime().strftime("%-d %b %Y, %H:%M")
    who = f" by {_person_name(by)}" if by is not None else ""
    title = f"{Origin(origin).label[0].upper()}{Origin(origin).label[1:]}{who}, {when}"
    return Source.objects.create(memory=memory, kind=_SOURCE_KINDS[origin], title=title, text=text)


def _channel(origin: str) -> str:
    return Fact.Channel.TYPED if origin == Origin.CORRECTION else origin


def _lock(memory: Memory, normalized: str) -> None:
    """A transaction-scoped advisory lock on this memory and statement."""
    digest = hashlib.blake2b(f"{memory.pk}:{normalized}".encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def request_if_learning(memory: Memory, trigger: str) -> None:
    """Ask for a pass from background work: a memory that is not learning is simply skipped."""
    with contextlib.suppress(LearningOff):
        request_consolidation(memory=memory, trigger=trigger)


@retry_transaction
def drop_inbox_item(*, item: InboxItem, by=None) -> bool:
    """Take a queued item out of the queue. It never reached the document, so nothing else is
    asked of the consolidator. Returns False when it was no longer pending."""
    with transaction.atomic():
        dropped = InboxItem.objects.filter(pk=item.pk, state=InboxItem.State.PENDING).update(
            state=InboxItem.State.DROPPED, settled_at=timezone.now()
        )
        if dropped and item.fact_id:
            knowledge_actions.forget_fact(fact=item.fact, reason="dropped from the queue")
    return dropped == 1


@retry_transaction
def forget(*, fact: Fact, by=None, origin: str = Origin.TYPED) -> str:
    """Forget a fact everywhere it is used. Queued: its inbox item is dropped (the document never
    had it). Filed: it stops being used now, and removing its line is queued for the next pass.
    Returns what happened, in words."""
    with transaction.atomic():
        fact.refresh_from_db()
        item = InboxItem.objects.filter(fact=fact, state=InboxItem.State.PENDING).first()
        if item is not None:
            drop_inbox_item(item=item, by=by)
            return "Forgotten; it was still waiting to be filed, so the document never had it."
        who = _person_name(by) or "a person"
        if not knowledge_actions.forget_fact(fact=fact, reason=f"forgotten by {who}"):
            return "It was not in use any more; nothing changed."
        if fact.in_document:
            add_to_inbox(
                memory=fact.memory,
                text=fact.text,
                origin=origin,
                by=by,
                action=InboxItem.Action.FORGET,
            )
            return "Forgotten; its line leaves the memory document at the next filing."
    return "Forgotten."


RESTORE_WINDOW = timedelta(minutes=10)


class CannotRestore(Exception):
    """A forgotten fact that cannot simply be brought back; the message says why."""


def restore(*, fact: Fact, by=None) -> None:
    """Undo a forget made moments ago: the fact is used again, its queue line is back, and a
    queued removal of its document line is dropped. Older forgets go through the change log."""
    with transaction.atomic():
        fact = Fact.objects.select_for_update().get(pk=fact.pk)
        if fact.status != Fact.Status.FORGOTTEN:
            raise CannotRestore("That fact was not forgotten; nothing to undo.")
        if fact.forgotten_at < timezone.now() - RESTORE_WINDOW:
            raise CannotRestore("It was forgotten too long ago to undo here; add it again.")
        dropped = InboxItem.objects.filter(fact=fact, state=InboxItem.State.DROPPED).first()
        if dropped is not None:
            dropped.state, dropped.settled_at = InboxItem.State.PENDING, None
            dropped.save(update_fields=["state", "settled_at"])
            fact.status = Fact.Status.QUEUED
        else:
            InboxItem.objects.filter(
                memory=fact.memory,
                action=InboxItem.Action.FORGET,
                text=fact.text,
                state=InboxItem.State.PENDING,
            ).update(state=InboxItem.State.DROPPED, settled_at=timezone.now())
            fact.status = Fact.Status.FILED
        fact.forgotten_at, fact.forgotten_reason = None, ""
        fact.save(update_fields=["status", "forgotten_at", "forgotten_reason"])


# Consolidation passes ------------------------------------------------------------------------


@dataclass(frozen=True)
class PassRequest:
    run: ConsolidationRun
    started: bool  # False: one was already running, and this is it

    @property
    def message(self) -> str:
        if self.started:
            return "Filing started: the pass runs in the background."
        return "A pass is already running; it was not started twice."


def request_consolidation(
    *, memory: Memory, trigger: str, by=None, send: bool = True
) -> PassRequest:
    """Start a pass unless one is running. The run row is the lease; the Celery message sent
    after commit only starts it, so a lost message is re-sent by the sweep. With
    ``send=False`` the caller runs the pass itself (the CLI does, then prints the outcome)."""
    from memory import consolidator  # the pass module imports these actions

    if not memory.learning:
        raise LearningOff(memory)
    consolidator.settle_lost_runs(memory=memory)
    running = ConsolidationRun.objects.running().filter(memory=memory).first()
    if running:
        return PassRequest(running, started=False)
    try:
        with transaction.atomic():
            run = ConsolidationRun.objects.create(
                memory=memory,
                trigger=trigger,
                requested_by=by,
                lease_expires_at=timezone.now() + consolidator.lease_length(),
            )
    except IntegrityError:  # another request won the partial unique index
        return PassRequest(ConsolidationRun.objects.running().get(memory=memory), started=False)
    if send:
        consolidator.send(run)
    return PassRequest(run, started=True)


# The document --------------------------------------------------------------------------------


def current_revision(memory: Memory) -> DocumentRevision:
    return DocumentRevision.objects.current(memory)


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
    filed: list[int] = (),
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
                author_name=_person_name(by),
                reverts=reverts,
            )
        )
    Change.objects.bulk_create(changes)
    # Forgetting reaches everything: the facts follow the document. Only a person's write
    # withdraws; a line a pass leaves out (to fit the cap) leaves its fact live.
    knowledge_actions.reconcile_with_document(
        memory=memory, text=text, filed=filed, by_person=kind != DocumentRevision.Kind.PASS
    )
    return revision, changes


def _change_source(kind: str) -> str:
    return {
        DocumentRevision.Kind.PASS: Change.Source.PASS,
        DocumentRevision.Kind.EDIT: Change.Source.EDIT,
        DocumentRevision.Kind.UNDO: Change.Source.UNDO,
        DocumentRevision.Kind.CLEAR: Change.Source.CLEAR,
        DocumentRevision.Kind.IMPORT: Change.Source.IMPORT,
    }[kind]


def check_fits(memory: Memory, text: str) -> None:
    size = document.size_bytes(text)
    if size > memory.max_bytes:
        raise ValidationError(
            f"The document is {size:,} bytes, {size - memory.max_bytes:,} over "
            f"memory_max_kb={memory.memory_max_kb} ({memory.max_bytes:,} bytes). Nothing was "
            "saved: shorten it, or raise memory_max_kb."
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


# Conflicts a person settles ------------------------------------------------------------------


class AlreadySettled(Exception):
    """Someone settled the conflict first; the message says how."""


@dataclass(frozen=True)
class Settled:
    conflict: Conflict

    @property
    def message(self) -> str:
        old, new = self.conflict.old, self.conflict.new
        return {
            Conflict.Resolution.KEEP_NEW: f"Kept “{new.text}”; “{old.text}” is no longer "
            "believed (it stays in the history).",
            Conflict.Resolution.KEEP_OLD: f"Kept “{old.text}”; “{new.text}” is forgotten.",
            Conflict.Resolution.KEEP_BOTH: f"Kept both: “{old.text}” and “{new.text}”.",
        }[self.conflict.resolution]


def settle_conflict(*, conflict: Conflict, keep: str, by=None) -> Settled:
    """Settle a conflict the gate opened: keep the new statement (the old one is retired, and
    its line leaves the document at the next filing), the old one (the new one is forgotten,
    as ✕ would), or both. Raises ValidationError for an unknown choice and AlreadySettled when
    someone settled it first."""
    if keep not in Conflict.Resolution.values:
        raise ValidationError(
            f"Keep must be one of {', '.join(Conflict.Resolution.values)}, not {keep!r}."
        )
    with transaction.atomic():
        settled = Conflict.objects.filter(pk=conflict.pk, state=Conflict.State.OPEN).update(
            state=Conflict.State.SETTLED,
            resolution=keep,
            settled_by=by,
            settled_by_name=_person_name(by),
            settled_at=timezone.now(),
        )
        conflict = Conflict.objects.select_related("old", "new", "memory").get(pk=conflict.pk)
        if not settled:
            who = f" by {conflict.settled_by_name}" if conflict.settled_by_name else ""
            raise AlreadySettled(
                f"Conflict #{conflict.pk} was already settled{who}: "
                f"{conflict.get_resolution_display()}."
            )
        old, new = conflict.old, conflict.new
        if keep == Conflict.Resolution.KEEP_NEW:
            knowledge_actions.supersede(old=old, new=new)
            if old.in_document:
                add_to_inbox(
                    memory=conflict.memory,
                    text=old.text,
                    origin=Origin.CORRECTION,
                    by=by,
                    action=InboxItem.Action.FORGET,
                )
        elif keep == Conflict.Resolution.KEEP_OLD:
            forget(fact=new, by=by)
    return Settled(conflict)
