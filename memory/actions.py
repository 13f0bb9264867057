"""What is taught and what is withdrawn: every surface (web, CLI, API, MCP, tasks) calls these.

- Teaching (``learn``): a ``memory.taught.Statement`` the surface built (and so checked), judged
  by the write gate, then a queued fact and its inbox item in one transaction, or more support
  for a fact already known. Enough waiting starts a pass
  early (``consolidator.EARLY_FILING_AT``).
- Withdrawing: drop a queued item, forget a fact (its document line goes at the next filing),
  restore one forgotten moments ago, and settle a conflict the gate opened.

A forget or a drop of an item a running pass read makes that pass's commit write nothing (the
item is no longer pending), and the next pass files the rest without it. The document itself
changes only through ``revisions.write_document``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from knowledge import actions as knowledge_actions
from knowledge import episodes as knowledge_episodes
from knowledge import gate, kinds, passages, search
from knowledge.embedding import embedder_for, vector_or_none
from knowledge.models import (
    Conflict,
    Episode,
    Fact,
    Memory,
    Passage,
    ReviewItem,
    Source,
    Subject,
    name_of,
)
from knowledge.read_layer import SYSTEM, reader_for
from knowledge.secret_filter import secret_in
from knowledge.subjects import mentioned_in
from knowledge.subjects import resolve as resolve_subjects
from memory import consolidator, switches
from memory.models import Confidence, ConsolidationRun, InboxItem, Origin
from memory.taught import Statement, check_origin_and_confidence, clean_fact_text

# The inbox -----------------------------------------------------------------------------------


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
    check_origin_and_confidence(origin, confidence)
    item = InboxItem.objects.create(
        memory=memory,
        text=text,
        origin=origin,
        confidence=confidence,
        action=action,
        taught_by=by,
        taught_by_name=name_of(by),
        fact=fact,
        outcome=outcome,
        valence=Fact.Valence.FAILURE if outcome is False else Fact.Valence.FACT,
    )
    if (
        memory.learning
        and InboxItem.objects.as_system("the queue's length starts an early pass")
        .for_memory(memory)
        .pending()
        .count()
        >= consolidator.EARLY_FILING_AT
    ):
        transaction.on_commit(
            lambda: consolidator.request_if_learning(memory, ConsolidationRun.Trigger.EARLY)
        )
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
    def became(self) -> str:
        """What became of the statement, decided once for every wording of it: ``known`` (more
        support for a fact already known), ``replaces`` (a fact it replaced), ``may_replace``
        (a conflict opened with one), ``failed_now`` / ``worked_now`` (an outcome unlike the
        one said before), or ``queued`` (a new fact)."""
        if self.verdict == "same" or self.item is None:
            return "known"
        if self.superseded is not None:
            return "replaces"
        if self.conflict is not None:
            return "may_replace"
        if self.earlier is not None:
            return "failed_now" if self.fact.valence == Fact.Valence.FAILURE else "worked_now"
        return "queued"

    @property
    def _message(self) -> str:
        fact = self.fact
        if self.became == "known":
            return (
                f"Already known (fact #{fact.pk}, now said {fact.support} times); nothing new "
                "was queued."
            )
        assert self.item is not None  # only a statement already known queues nothing
        queued = f"Queued #{self.item.pk}: {fact.text}"
        match self.became:
            case "replaces":
                assert self.superseded is not None
                return f"{queued} (it replaces “{self.superseded.text}”: {self.reason})"
            case "may_replace":
                assert self.conflict is not None
                return (
                    f"{queued} It may replace “{self.conflict.old.text}” ({self.reason}); both "
                    f"are kept until you settle it under To settle or in Review (conflict "
                    f"#{self.conflict.pk})."
                )
            case "failed_now":
                assert self.earlier is not None
                return (
                    f"Stored as a failure (fact #{fact.pk}): it was said before as working "
                    f"(fact #{self.earlier.pk}), and this time it did not work."
                )
            case "worked_now":
                assert self.earlier is not None
                return (
                    f"Stored as a success (fact #{fact.pk}): it failed before (fact "
                    f"#{self.earlier.pk}), and this time it worked."
                )
        return queued


@retry_transaction
def learn(statement: Statement) -> Learned:
    """Teach brain one statement, from any surface: ``judge`` it (the write gate), then
    ``file`` it — a fact row (queued) and its inbox item, or, when it is already known, more
    support. The surface built the statement, so its words were checked already
    (``memory.taught``).

    A statement with ``evidence`` (an agent's episodes) is learned only while learning is on.
    Raises UnknownSubject, gate.BadVerdict or LearningOff. Two identical statements taught at
    the same moment make one fact with support 2. A memory whose vectors come from a worker
    waits for it at most ``embedding.WRITE_TIMEOUT_S``: with no answer the fact is judged by
    its words and stored without a vector, which the background re-embedding gives it later —
    nothing taught is lost for an absent worker.
    """
    if statement.evidence:  # what an agent saw is learned only while learning is on
        switches.require_learning(statement.memory)
    return file(judge(statement))


def learn_conclusion(
    report: list[str],
    *,
    memory: Memory,
    text: str,
    origin: str,
    source: Source,
    cites: Sequence[Passage] = (),
    reader=SYSTEM,
) -> Learned | None:
    """Teach a conclusion brain drew itself (a study session's, an insight run's) at low
    confidence — it is a guess from what was read, not something a person said — and write
    in its run's ``report`` what became of it: the outcome's message, or "Not filed:" and why
    its words were refused. None when they were."""
    try:
        learned = learn(
            Statement.derived(
                memory=memory,
                text=text,
                origin=origin,
                confidence=Confidence.LOW,
                source=source,
                cites=cites,
                reader=reader,
            )
        )
    except ValidationError as error:
        report.append(f"Not filed: {' '.join(error.messages)}")
        return None
    report.append(learned.message)
    return learned


@dataclass(frozen=True)
class Judged:
    """A statement and what the gate made of it, before anything is written."""

    statement: Statement
    judgement: gate.Judgement
    about: list[Subject]  # the pages it is about: those named, and those its words mention
    embedding: list[float] | None
    embedder: str
    twins: list[Episode]  # waiting episodes that say the same


def judge(statement: Statement) -> Judged:
    """The gate's verdict on ``statement``, against what its reader reads: the teller's own
    verdict when it gave one, else the model's (when the memory judges with one) or the
    offline judge's. With it, the pages the statement is about, its vector (none from an
    absent worker: given later) and the episodes still waiting that say the same
    (``gate.pending_twins``), which ``file`` claims and cites, so a duplicate is caught before
    any sleep pass has run. Writes nothing."""
    memory, text, outcome = statement.memory, statement.text, statement.outcome
    about = resolve_subjects(memory, list(statement.subjects))
    about += [s for s in mentioned_in(memory, text) if s not in about]
    embedder = embedder_for(memory)
    embedding = vector_or_none(embedder, text)
    speaker, reader = statement.speaker, statement.reader
    if statement.verdict:
        judgement = gate.from_agent(
            memory, statement.verdict, statement.target, outcome=outcome, reader=reader
        )
    else:
        near = gate.neighbours(memory, text, embedding, reader=reader)
        if gate.model_judging(memory):
            judgement = gate.judge_with_model(memory, near, text, outcome=outcome, speaker=speaker)
        else:
            judgement = gate.judge(near, text, outcome=outcome, speaker=speaker)
    twins = gate.pending_twins(
        memory,
        text,
        outcome=outcome,
        embedding=embedding,
        speaker=speaker,
        exclude=[episode.pk for episode in statement.evidence],
    )
    return Judged(statement, judgement, about, embedding, embedder.name, twins)


def file(judged: Judged) -> Learned:
    """File a judged statement in one transaction, under an advisory lock on its words: the
    waiting twins claimed, then either more support for the fact it restates (said again by
    someone else a moment ago counts too) or a new queued fact — replacing, or opening a
    conflict with, what it contradicts or refines (``_settle_older``) — and its inbox item.

    A statement with no ``source`` gets one made for this moment, whose line is the passage
    the fact cites. A statement already known only strengthens the fact it restates, citing
    the line said now only as the fact's readers read it (``passages.keeping_readers``)."""
    statement, judgement = judged.statement, judged.judgement
    with transaction.atomic():
        _lock(statement.memory, statement.normalized)
        caught = knowledge_episodes.claim(judged.twins)
        cited = [*statement.evidence, *knowledge_episodes.with_restatements(caught)]
        if judgement.verdict == "novel":
            twin = _twin(statement)
            if twin is not None:  # taught a moment ago by someone else
                judgement = gate.Judgement("same", twin, "said at the same moment")
        made = statement.source is None
        source = _source_for(statement) if statement.source is None else statement.source
        if judgement.verdict == "same":
            fact = _strengthen(statement, _judged(judgement), source, made, cited)
            return Learned("same", fact, None, judgement.reason, caught=tuple(caught))
        fact = knowledge_actions.file_fact(
            memory=statement.memory,
            text=statement.text,
            channel=_channel(statement.origin),
            kind=statement.kind
            or kinds.kind_for(statement.text, correction=statement.origin == Origin.CORRECTION),
            confidence=statement.confidence,
            by=statement.by,
            source=source,
            subjects=judged.about,
            outcome=statement.outcome,
            embedding=judged.embedding,
            embedder=judged.embedder,
            evidence=cited,
            stated=not statement.evidence,
            turn=statement.turn,
            # The line said now is the first passage of the source made for it.
            cites=statement.cites
            or ([passages.line_of_new_source(source, statement.text)] if made else ()),
        )
        superseded, conflict, earlier = _settle_older(statement, judgement, fact, source)
        item = add_to_inbox(
            memory=statement.memory,
            text=statement.text,
            origin=statement.origin,
            confidence=statement.confidence,
            by=statement.by,
            fact=fact,
            outcome=statement.outcome,
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


def _strengthen(
    statement: Statement, known: Fact, source: Source, made: bool, cited: list[Episode]
) -> Fact:
    """More support for ``known``, which ``statement`` restates, citing the line said now as
    far as its readers read it."""
    said = list(statement.cites) or [
        passages.line_of_new_source(source, statement.text)
        if made
        else passages.of_line(source, statement.text)
    ]
    passages.cite(known, passages.keeping_readers(known, said))
    return knowledge_actions.strengthen(
        fact=known,
        text=statement.text,
        by=statement.by,
        channel=_channel(statement.origin),
        source=source,
        outcome=statement.outcome,
        evidence=cited,
        stated=not statement.evidence,
        turn=statement.turn,
    )


def _settle_older(
    statement: Statement, judgement: gate.Judgement, fact: Fact, source: Source
) -> tuple[Fact | None, Conflict | None, Fact | None]:
    """What the new ``fact`` does to the older one the gate named: (superseded, conflict,
    earlier). A contradiction or refinement replaces it only when everyone who read it reads
    the new one and it is replaced silently (the teller's own verdict, or
    ``replaces_silently``); otherwise both stay live in a conflict. Other facts saying the old
    value are replaced or asked about the same way."""
    superseded = conflict = earlier = None
    verdict, told = judgement.verdict, statement.verdict  # the teller's own is done as said
    if verdict in ("contradiction", "refinement") and not passages.reads_as_widely(
        fact, _judged(judgement)
    ):
        conflict = knowledge_actions.open_conflict(
            old=_judged(judgement),
            new=fact,
            reason=f"{judgement.reason}; some who read the older statement may not read "
            "the newer one",
        )
    elif (
        verdict in ("contradiction", "refinement")
        and not told
        and not replaces_silently(_judged(judgement), source=source, origin=statement.origin)
    ):
        conflict = knowledge_actions.open_conflict(
            old=_judged(judgement),
            new=fact,
            reason=f"{judgement.reason}; the two come from different sources",
        )
    elif verdict in ("contradiction", "refinement"):
        knowledge_actions.supersede(old=_judged(judgement), new=fact)
        superseded = judgement.target
    elif verdict == "conflict":
        conflict = knowledge_actions.open_conflict(
            old=_judged(judgement), new=fact, reason=judgement.reason
        )
    elif verdict == "different_outcome":
        earlier = judgement.target
    for also in judgement.also if verdict == "contradiction" else ():
        # The old value said again elsewhere: replaced with the nearest, or asked about.
        if passages.reads_as_widely(fact, also) and (
            told or replaces_silently(also, source=source, origin=statement.origin)
        ):
            knowledge_actions.supersede(old=also, new=fact)
        else:
            knowledge_actions.open_conflict(old=also, new=fact, reason=judgement.reason)
    return superseded, conflict, earlier


# A person telling brain something now: the line typed, said in a conversation, at the terminal
# or through the API (brain makes the source for that moment), or a person's correction.
_SAID_NOW = {Source.Kind.CONVERSATION, Source.Kind.TYPED, Source.Kind.TERMINAL, Source.Kind.API}


def replaces_silently(old: Fact, *, source: Source, origin: str) -> bool:
    """Whether a statement from ``source`` that contradicts or refines ``old`` replaces it at
    once (today's newest-wins), rather than opening a conflict that keeps both live.

    It replaces it when the correction is someone's own, at once:

    - a person telling brain now (a correction, or a line typed, said in a conversation, at the
      terminal or through the API): the "no, actually…" of the record's keepers, who are asked
      nothing about their own words — and the gate only ever judges them against what they
      read;
    - or the same source correcting itself: ``old`` cites ``source`` or an earlier version of
      it (a conversation where someone takes back what they said, a document's new version).

    Otherwise — a note, document or email added, an import, an insight or study run,
    disagreeing with a fact that cites other sources — neither side outranks the other, so
    both stay live and a person settles it (Review), seeing the passages of both sides.

    (``learn`` asks this only of the gate's own verdicts. A verdict the teller gave — an
    agent's, or brain's arithmetic replacing its previous judgement — names what it replaces
    and is done as said.)"""
    if origin == Origin.CORRECTION or source.kind in _SAID_NOW:
        return True
    versions, earlier = {source.pk}, source.previous_id
    while earlier is not None and earlier not in versions:
        versions.add(earlier)
        versions_of = Source.objects.as_system("the versions of a source, by id")
        earlier = versions_of.filter(pk=earlier).values_list("previous_id", flat=True).first()
    cited = Passage.objects.as_system("whether a fact cites this source").filter(
        facts=old, source_id__in=versions
    )
    return old.source_id in versions or cited.exists()


def _judged(judgement: gate.Judgement) -> Fact:
    """The fact a verdict other than novel is about; the gate always names one."""
    if judgement.target is None:
        raise gate.BadVerdict(f"A {judgement.verdict} verdict needs the fact it is about.")
    return judgement.target


def _twin(statement: Statement) -> Fact | None:
    """A live fact the statement's reader may read with the very same words that says the same
    thing (a first-person statement by someone else says something else: "I like it at 19", by
    Sarah or by Tom)."""
    live = Fact.objects.for_memory(statement.memory).live().readable_by(statement.reader)
    said = gate.Said(statement.text, statement.speaker)
    for fact in live.filter(normalized=statement.normalized)[:5]:
        if gate.relate(gate.Said(fact.text, fact.taught_by_name), said).verdict == "same":
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


def _source_for(statement: Statement) -> Source:
    """Where a statement taught with no conversation or run came from: the moment itself, so
    "why does brain think that?" always has something to open."""
    origin = Origin(statement.origin)
    when = timezone.localtime().strftime("%-d %b %Y, %H:%M")
    who = f" by {statement.speaker}" if statement.by is not None else ""
    title = f"{origin.label[0].upper()}{origin.label[1:]}{who}, {when}"
    return Source.objects.create(
        memory=statement.memory, kind=_SOURCE_KINDS[origin], title=title, text=statement.text
    )


def _channel(origin: str) -> str:
    return Fact.Channel.TYPED if origin == Origin.CORRECTION else origin


def _lock(memory: Memory, normalized: str) -> None:
    """A transaction-scoped advisory lock on this memory and statement."""
    digest = hashlib.blake2b(f"{memory.pk}:{normalized}".encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


@retry_transaction
def drop_inbox_item(*, item: InboxItem, by=None) -> bool:
    """Take a queued item out of the queue. It never reached the document, so nothing else is
    asked of the consolidator. Returns False when it was no longer pending."""
    with transaction.atomic():
        dropped = InboxItem.objects.filter(pk=item.pk, state=InboxItem.State.PENDING).update(
            state=InboxItem.State.DROPPED, settled_at=timezone.now()
        )
        if dropped and item.fact is not None:
            knowledge_actions.forget_fact(fact=item.fact, reason="dropped from the queue")
    return dropped == 1


@retry_transaction
def forget(*, fact: Fact, by=None, origin: str = Origin.TYPED) -> str:
    """Forget a fact everywhere it is used. Queued: its inbox item is dropped (the document never
    had it). Filed: it stops being used now, and removing its line is queued for the next pass.
    Returns what happened, in words."""
    with transaction.atomic():
        fact.refresh_from_db()
        waiting = InboxItem.objects.as_system("the queue line of the fact being forgotten")
        item = waiting.filter(fact=fact, state=InboxItem.State.PENDING).first()
        if item is not None:
            drop_inbox_item(item=item, by=by)
            return "Forgotten; it was still waiting to be filed, so the document never had it."
        who = name_of(by) or "a person"
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


@dataclass(frozen=True)
class LineForgotten:
    """A person's forget of a line: the removal queued, and the facts it stopped."""

    item: InboxItem
    facts: tuple[Fact, ...]

    @property
    def message(self) -> str:
        queued = f"Queued #{self.item.pk} for removal: {self.item.text}"
        if not self.facts:
            return queued
        which = ", ".join(f"fact #{fact.pk} “{fact.text}”" for fact in self.facts)
        return f"{queued}\nForgotten now, everywhere: {which} is no longer believed."


FORGET_CANDIDATES = 20  # the facts read to find those a forget's words say


@retry_transaction
def forget_line(*, memory: Memory, text: str, by=None, origin: str = Origin.TYPED) -> LineForgotten:
    """A person asks brain to forget what ``text`` says (`brain memory forget "…"`): every
    live fact they may read that says it (the same words, or a line the words withdraw, as a
    pass reads them: ``knowledge.actions.says_line``) stops being believed now, everywhere —
    recall, explain, the facts list — and the line leaves the document at the next filing.
    With no fact saying it, only the line's removal is queued (a line written by hand)."""
    text = clean_fact_text(text)
    check_origin_and_confidence(origin, Confidence.MEDIUM)
    readable = Fact.objects.for_memory(memory).live().readable_by(reader_for(by))
    near = search.neighbours(memory, readable, text=text, embedding=None, limit=FORGET_CANDIDATES)
    facts = tuple(fact for fact, _ in near if knowledge_actions.says_line(text, fact.text))
    who = name_of(by) or "a person"
    with transaction.atomic():
        for fact in facts:
            waiting = InboxItem.objects.as_system("the queue line of the fact being forgotten")
            item = waiting.filter(fact=fact, state=InboxItem.State.PENDING).first()
            if item is not None:
                drop_inbox_item(item=item, by=by)
            else:
                knowledge_actions.forget_fact(fact=fact, reason=f"forgotten by {who}")
        item = add_to_inbox(
            memory=memory, text=text, origin=origin, by=by, action=InboxItem.Action.FORGET
        )
    return LineForgotten(item, facts)


RESTORE_WINDOW = timedelta(minutes=10)


class CannotRestore(StateConflict):
    """A forgotten fact that cannot simply be brought back; the message says why."""


def restore(*, fact: Fact, by=None) -> None:
    """Undo a forget made moments ago: the fact is used again, its queue line is back, and a
    queued removal of its document line is dropped. Older forgets go through the change log."""
    with transaction.atomic():
        locked = Fact.objects.as_system("the fact being restored, locked")
        fact = locked.select_for_update().get(pk=fact.pk)
        if fact.status != Fact.Status.FORGOTTEN:
            raise CannotRestore("That fact was not forgotten; nothing to undo.")
        if fact.forgotten_at is None or fact.forgotten_at < timezone.now() - RESTORE_WINDOW:
            raise CannotRestore("It was forgotten too long ago to undo here; add it again.")
        lines = InboxItem.objects.as_system("the queue line of the fact being restored")
        dropped = lines.filter(fact=fact, state=InboxItem.State.DROPPED).first()
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


# Conflicts a person settles ------------------------------------------------------------------


class AlreadySettled(StateConflict):
    """Someone settled the conflict first; the message says how."""


@dataclass(frozen=True)
class Settled:
    conflict: Conflict

    @property
    def message(self) -> str:
        old, new, merged = self.conflict.old, self.conflict.new, self.conflict.merged_into
        match self.conflict.resolution:
            case Conflict.Resolution.KEEP_NEW:
                return (
                    f"Kept “{new.text}”; “{old.text}” is no longer believed (it stays in the "
                    "history)."
                )
            case Conflict.Resolution.KEEP_OLD:
                return f"Kept “{old.text}”; “{new.text}” is forgotten."
            case Conflict.Resolution.DATED:
                return (
                    f"Kept both with their dates: “{old.text}” until "
                    f"{_day(new.valid_from)}, “{new.text}” since {_day(new.valid_from)}."
                )
            case Conflict.Resolution.MERGED if merged is not None:
                return (
                    f"Merged into “{merged.text}” (fact #{merged.pk}), which cites the passages "
                    f"of both; “{old.text}” and “{new.text}” are no longer believed (they stay "
                    "in the history)."
                )
        return f"Kept both: “{old.text}” and “{new.text}”."


def _day(when) -> str:
    return f"{timezone.localtime(when):%-d %b %Y}"


def settle_conflict(
    *, conflict: Conflict, keep: str, by=None, text: str | None = None, since=None
) -> Settled:
    """Settle a conflict, from every surface (the page, Review, the Knowledge tab, the API,
    the CLI):

    - ``new``: the new statement holds; the old one is retired (its line leaves the document
      at the next filing);
    - ``old``: the old one holds; the new one is forgotten, as ✕ would;
    - ``both``: both hold as they are;
    - ``dated``: both were true, each for its own time: the old one until ``since`` (a date or
      datetime, by default when the new one was said), the new one from then. Neither is
      replaced (no ``superseded_by``): the old one's validity closes, so it reads "until"
      that day in the history and ``as_of`` answers with it before then, and the new one
      reads "since";
    - ``merged``: a person wrote ``text`` in place of both. It is a new fact about the pages of
      both, citing the passages of both sides (so it is read by whoever reads both, as the
      conflict was), and both sides are replaced by it.

    The conflict's Review item is settled with it. Raises ValidationError (an unknown choice, a
    merge without words, a date outside both statements' time) and AlreadySettled when someone
    settled it first."""
    if keep not in Conflict.Resolution.values:
        raise ValidationError(
            f"Keep must be one of {', '.join(Conflict.Resolution.values)}, not {keep!r}."
        )
    words = ""
    if keep == Conflict.Resolution.MERGED:
        words = clean_fact_text(text)
        secret = secret_in(words)
        if secret:
            raise ValidationError(f"That looks like {secret}. brain does not keep secrets.")
        embedder = embedder_for(conflict.memory_id)
        embedding = vector_or_none(embedder, words)
    with transaction.atomic():
        now = timezone.now()
        settled = Conflict.objects.filter(pk=conflict.pk, state=Conflict.State.OPEN).update(
            state=Conflict.State.SETTLED,
            resolution=keep,
            settled_by=by,
            settled_by_name=name_of(by),
            settled_at=now,
        )
        conflict = (
            Conflict.objects.as_system("the conflict just settled")
            .select_related("old", "new", "memory")
            .get(pk=conflict.pk)
        )
        if not settled:
            who = f" by {conflict.settled_by_name}" if conflict.settled_by_name else ""
            raise AlreadySettled(
                f"Conflict #{conflict.pk} was already settled{who}: "
                f"{conflict.get_resolution_display()}."
            )
        ReviewItem.objects.filter(conflict=conflict, state=ReviewItem.State.OPEN).update(
            state=ReviewItem.State.SETTLED, settled_by=by, settled_at=now
        )
        old, new = conflict.old, conflict.new
        if keep == Conflict.Resolution.KEEP_NEW:
            knowledge_actions.supersede(old=old, new=new)
            _queue_line_removal(old, by)
        elif keep == Conflict.Resolution.KEEP_OLD:
            forget(fact=new, by=by)
        elif keep == Conflict.Resolution.DATED:
            _date_both(old, new, since if since is not None else new.valid_from, by)
        elif keep == Conflict.Resolution.MERGED:
            merged = _merge_sides(conflict, words, embedding, embedder.name, by)
            Conflict.objects.filter(pk=conflict.pk).update(merged_into=merged)
            conflict.merged_into = merged
        conflict.old.refresh_from_db()
        conflict.new.refresh_from_db()
    return Settled(conflict)


def _queue_line_removal(fact: Fact, by) -> None:
    """A fact no longer believed leaves the document at the next filing."""
    if fact.in_document:
        add_to_inbox(
            memory=fact.memory,
            text=fact.text,
            origin=Origin.CORRECTION,
            by=by,
            action=InboxItem.Action.FORGET,
        )


def _date_both(old: Fact, new: Fact, since, by) -> None:
    """``old`` holds until ``since``, ``new`` from then: both kept, neither replaced."""
    if not isinstance(since, datetime):  # a day: from its start, where the memory is
        since = timezone.make_aware(datetime.combine(since, time.min))
    if since > timezone.now():
        raise ValidationError(
            f"{_day(since)} is after today: brain keeps what was and is true. Keep both as "
            "they are, and settle it again when the day comes."
        )
    if since <= old.valid_from:
        raise ValidationError(
            f"“{old.text}” was only said on {_day(old.valid_from)}: choose a day after that "
            "for when it stopped being true."
        )
    Fact.objects.filter(pk=old.pk).update(valid_to=since)
    Fact.objects.filter(pk=new.pk).update(valid_from=since)
    _queue_line_removal(old, by)


def _merge_sides(conflict: Conflict, text: str, embedding, embedder: str, by) -> Fact:
    """The merged statement: about the pages of both sides, citing the passages of both, and
    taught by the person who wrote it; both sides are replaced by it and it waits to be filed."""
    old, new = conflict.old, conflict.new
    sides = [old.pk, new.pk]
    cites = list(
        Passage.objects.as_system("what both sides cite")
        .filter(facts__in=sides)
        .distinct()
        .order_by("pk")
    )
    about = list(
        Subject.objects.as_system("what both sides are about")
        .filter(facts__in=sides)
        .distinct()
        .order_by("pk")
    )
    merged = knowledge_actions.file_fact(
        memory=conflict.memory,
        text=text,
        channel=Fact.Channel.TYPED,
        kind=new.kind,
        by=by,
        subjects=about,
        embedding=embedding,
        embedder=embedder,
        cites=cites,
    )
    for side in (old, new):
        knowledge_actions.supersede(old=side, new=merged)
        _queue_line_removal(side, by)
    add_to_inbox(memory=conflict.memory, text=text, origin=Origin.CORRECTION, by=by, fact=merged)
    return merged
