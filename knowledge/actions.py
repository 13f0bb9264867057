"""Writes to the facts store. Nothing is deleted in the ordinary course: validity closes, status
changes, and every row keeps who taught it and when. (Facts about an entity the house lost are
the exception: they are purged thirty days after it went, as the household asked.)"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import ClassVar

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Greatest
from django.dispatch import Signal
from django.utils import timezone

from brain.db import inserting
from brain.errors import StateConflict
from brain.words import counted
from knowledge import kinds, passages, statements
from knowledge.models import (
    Citation,
    Conflict,
    Episode,
    Fact,
    Memory,
    Observation,
    Passage,
    ReviewItem,
    Source,
    Subject,
    name_of,
)

CONFIDENCE = {"high": 0.8, "medium": 0.6, "low": 0.4}
PRIOR_WEIGHT = 2  # the taught confidence counts as this many observed outcomes
REMOVED_SUBJECT_GRACE = timedelta(days=30)
LINE_GONE = "its line is no longer in the memory document"

# Sent once for every new fact row, in the transaction that writes it: kwargs fact, memory. A
# receiver's rows commit or roll back with the fact, and what leaves the process goes on commit
# (``send_on_commit``). Sent after the commit, the timeline's event was a transaction of its
# own, with a commit to wait for on every statement taught.
brain_learned = Signal()


def file_fact(
    *,
    memory: Memory,
    text: str,
    channel: str,
    kind: str,
    confidence: str = "medium",
    by=None,
    source: Source | None = None,
    subjects: Sequence[Subject] = (),
    outcome: bool | None = None,
    embedding: list[float] | None = None,
    embedder: str = "",
    evidence: Sequence[Episode] = (),
    stated: bool | None = None,
    turn: int | None = None,
    cites: Sequence[Passage] = (),
) -> Fact:
    """A new fact row, queued (its candidate waits in the inbox). Announces ``brain_learned``.

    It cites ``cites``, or else the passage of ``source`` holding ``text`` (the line itself,
    added to the source when no passage holds it; with no source, to the memory's source of
    lines taught without one): every fact cites a passage, and who may read it follows them
    (visibility.py).

    ``evidence``: episodes that said it (it was distilled from them, or they were waiting to
    be). Each is cited by an observation of its own (when it happened, its words, its
    outcome); the fact is valid from the first observation, not from the moment it was
    written, and its support counts them. ``stated``: ``text`` was said now as well (by
    default only when there is no evidence). ``turn``: the turn of the conversation ``source``
    that said it.
    """
    now = timezone.now()
    prior = CONFIDENCE[confidence]
    seen = _observed(evidence, stated=not evidence if stated is None else stated, now=now)
    if not cites:
        cites = [passages.of_line(source or passages.lines_source(memory), text)]
    fact = Fact.objects.create(
        label_sets=passages.label_sets_of(cites),
        memory=memory,
        text=text,
        normalized=statements.normalise(text),
        kind=kind,
        valence=Fact.Valence.FAILURE if outcome is False else Fact.Valence.FACT,
        outcome=outcome,
        channel=channel,
        taught_by=by,
        taught_by_name=name_of(by),
        source=source,
        confidence=prior,
        prior=prior,
        support=len(seen),
        valid_from=min(seen[0][0], now),
        expires_at=kinds.expiry_for(kind, now),
        subject_removed=any(not subject.present for subject in subjects),
        embedding=embedding,
        embedder=embedder if embedding is not None else "",
        created_at=now,
    )
    # Its citations, subject links (a new row links to nothing yet) and observations, in one
    # statement after the fact's own (a link's trigger reads the fact).
    inserting.insert_together(
        [Citation(fact=fact, passage=passage) for passage in cites],
        [Fact.subjects.through(fact=fact, subject=subject) for subject in set(subjects)],
        _observations(fact, seen, True, text, by, channel, source, outcome, turn),
        ignoring_conflicts=[Citation],
    )
    brain_learned.send(sender=Fact, fact=fact, memory=memory)
    return fact


def _observed(
    evidence: Sequence[Episode], *, stated: bool, now: datetime
) -> list[tuple[datetime, Episode | None]]:
    """Every time a statement was seen, oldest first: each episode, and now when it was stated
    now (``None`` in place of an episode)."""
    seen: list[tuple[datetime, Episode | None]] = [
        (episode.occurred_at, episode) for episode in evidence
    ]
    seen += [(now, None)] if stated or not seen else []
    return sorted(seen, key=lambda pair: (pair[0], pair[1].pk if pair[1] else 0))


def _observations(
    fact, seen, taught: bool, text, by, channel, source, outcome, turn
) -> list[Observation]:
    """A row for each time in ``seen`` (``_observed``): the first taught when ``taught`` (a new
    fact), every other restated."""
    return [
        _observation(
            fact,
            Observation.Kind.TAUGHT if taught and index == 0 else Observation.Kind.RESTATED,
            when,
            episode,
            text,
            by,
            channel,
            source,
            outcome,
            turn,
        )
        for index, (when, episode) in enumerate(seen)
    ]


def _observation(
    fact, kind, when, episode, text, by, channel, source, outcome, turn=None
) -> Observation:
    """The statement said now (``episode`` None), or one episode, in its own words, time,
    teller and outcome: a row not written yet."""
    if episode is not None:
        text, by, outcome, turn = episode.text, episode.recorded_by, episode.outcome_as_bool, None
    return Observation(
        fact=fact,
        kind=kind,
        text=text,
        said_by=by,
        said_by_name=name_of(by),
        channel=channel,
        source=source,
        outcome=outcome,
        episode=episode,
        turn=turn,
        created_at=when,
    )


def strengthen(
    *,
    fact: Fact,
    text: str,
    by=None,
    channel: str,
    source: Source | None = None,
    outcome: bool | None = None,
    evidence: Sequence[Episode] = (),
    stated: bool | None = None,
    turn: int | None = None,
) -> Fact:
    """The same thing said again: more support and an observation of its own (who, when,
    where), never more confidence (that takes outcomes) and never a new teacher. Said in
    ``evidence`` (episodes): one observation, and one more support, for each; ``stated`` as
    for ``file_fact``."""
    seen = _observed(
        evidence, stated=not evidence if stated is None else stated, now=timezone.now()
    )
    Fact.objects.filter(pk=fact.pk).update(support=F("support") + len(seen))
    inserting.insert_together(
        _observations(fact, seen, False, text, by, channel, source, outcome, turn)
    )
    fact.refresh_from_db(fields=["support"])
    return fact


def open_conflict(*, old: Fact, new: Fact, reason: str) -> Conflict:
    """Keep both and ask: ``new`` may replace ``old``, and a person settles which holds (in
    Review, where the conflict's item waits, or on the page). ``new`` is the fact the caller
    has just written, in this transaction, so no conflict or item names it yet: both are
    written as they are (two statements where looking for them first took eight)."""
    conflict = Conflict.objects.create(
        memory=new.memory, old=old, new=new, state=Conflict.State.OPEN, reason=reason[:300]
    )
    ReviewItem.objects.create(
        memory=conflict.memory,
        conflict=conflict,
        state=ReviewItem.State.OPEN,
        kind=ReviewItem.Kind.CONFLICT,
        question=conflict.reason,
        created_at=conflict.created_at,
    )
    return conflict


def supersede(*, old: Fact, new: Fact) -> None:
    """Close ``old``'s validity and link it to what replaced it. Nothing is deleted, so "what
    did it believe on date D" stays answerable. (A replacement distilled from episodes older
    than ``old`` closes it when it began, never before.)"""
    Fact.objects.filter(pk=old.pk, valid_to__isnull=True).update(
        valid_to=Greatest(Value(new.valid_from), F("valid_from")), superseded_by=new
    )


def forget_fact(*, fact: Fact, reason: str) -> bool:
    """Stop using a fact (it stays, marked forgotten, with the reason). False if already out."""
    return bool(
        Fact.objects.filter(pk=fact.pk, status__in=[Fact.Status.QUEUED, Fact.Status.FILED]).update(
            status=Fact.Status.FORGOTTEN, forgotten_at=timezone.now(), forgotten_reason=reason
        )
    )


def record_outcome(*, fact: Fact, success: bool) -> Fact:
    """Acting on the fact worked (or did not). The only thing that moves confidence:
    (prior × PRIOR_WEIGHT + successes) / (PRIOR_WEIGHT + successes + failures)."""
    with transaction.atomic():
        locked = Fact.objects.as_system("the fact an outcome was reported on, locked")
        fact = locked.select_for_update().get(pk=fact.pk)
        if success:
            fact.successes += 1
        else:
            fact.failures += 1
        observed = fact.successes + fact.failures
        fact.confidence = round(
            (fact.prior * PRIOR_WEIGHT + fact.successes) / (PRIOR_WEIGHT + observed), 4
        )
        fact.used_at = timezone.now()
        fact.save(update_fields=["successes", "failures", "confidence", "used_at"])
    return fact


# Following the document -----------------------------------------------------------------------


# The label memory's composers put in front of a failure's line ("- Avoid: …"). The memory app
# sits above this one, so the pattern is repeated here rather than imported.
_AVOID_LABEL = re.compile(r"^(?:avoid\s*:\s*)+", re.IGNORECASE)


@dataclass
class _Lines:
    """The document's statements, normalised: plain lines, and "Avoid: X" lines as X."""

    plain: list[str]
    avoid: list[str]

    @classmethod
    def of(cls, text: str) -> _Lines:
        plain: list[str] = []
        avoid: list[str] = []
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            said = statements.normalise(stripped.lstrip("-*+ ").strip())
            bare = _AVOID_LABEL.sub("", said)
            (avoid if bare != said else plain).append(bare)
        return cls(plain, avoid)

    def for_fact(self, fact: Fact) -> tuple[set[str], list[str]]:
        """The lines that may be ``fact``'s, as a set and a list: an "Avoid:" line is only a
        failure's, or one taught with the label already (a failure filed before failures had
        their heading may still have a plain line)."""
        if fact.valence == Fact.Valence.FAILURE or _AVOID_LABEL.match(fact.normalized):
            return self.every_set, self.plain + self.avoid
        return self.plain_set, self.plain

    @cached_property
    def plain_set(self) -> set[str]:
        return set(self.plain)

    @cached_property
    def every_set(self) -> set[str]:
        return set(self.plain) | set(self.avoid)


def _says(fact: Fact, lines: _Lines) -> bool:
    line_set, line_list = lines.for_fact(fact)
    if _AVOID_LABEL.sub("", fact.normalized) in line_set:
        return True
    said = _AVOID_LABEL.sub("", fact.text)
    return any(
        statements.compare(line, said).verdict in {"same", "refinement"} for line in line_list
    )


def reconcile_with_document(
    *, memory: Memory, text: str, filed: Sequence[int] = (), by_person: bool = False
) -> dict:
    """Make the facts follow the document after any change to it.

    The document is a summary, the facts are the memory. ``by_person``: a person's write (an
    edit, an undo, a clear, an import) — a filed fact whose line it took out was withdrawn and
    is forgotten, except corrections and rules, which a summary not quoting them does not
    withdraw. A pass (``by_person`` False) only summarises: a fact whose line it left out, to fit
    the cap or otherwise, stays live and recallable with ``in_document`` False. A fact forgotten
    for its line comes back when its line does (an undo), and a left-out fact whose exact line
    returns is in the document again. An "Avoid: X" line is the line of failure X.

    ``filed``: facts whose candidates this change just filed (queued → filed). Queued facts are
    otherwise left alone until they have been judged.
    """
    lines = _Lines.of(text)
    now = timezone.now()
    if filed:
        just_filed = Fact.objects.as_system("facts this change of the document filed")
        for fact in just_filed.filter(pk__in=filed, status=Fact.Status.QUEUED):
            fact.status = Fact.Status.FILED
            fact.in_document = _says(fact, lines)
            fact.save(update_fields=["status", "in_document"])
    filed_facts = (
        Fact.objects.as_system("the document is checked against every fact filed in it")
        .for_memory(memory)
        .filter(status=Fact.Status.FILED)
    )
    missing = [
        fact
        for fact in filed_facts.filter(in_document=True).only(
            "pk", "text", "normalized", "valence", "kind"
        )
        if not _says(fact, lines)
    ]
    withdrawn = [
        fact.pk
        for fact in missing
        if by_person and fact.kind not in (Fact.Kind.CORRECTION, Fact.Kind.RULE)
    ]
    forgotten = Fact.objects.filter(pk__in=withdrawn).update(
        status=Fact.Status.FORGOTTEN, forgotten_at=now, forgotten_reason=LINE_GONE
    )
    left_out = Fact.objects.filter(
        pk__in=[fact.pk for fact in missing if fact.pk not in withdrawn]
    ).update(in_document=False)
    back = Q(normalized__in=lines.plain) | Q(
        valence=Fact.Valence.FAILURE, normalized__in=lines.avoid
    )
    returned = filed_facts.filter(back, in_document=False).update(in_document=True)
    revived = (
        Fact.objects.for_memory(memory)
        .filter(back, status=Fact.Status.FORGOTTEN, forgotten_reason=LINE_GONE)
        .update(status=Fact.Status.FILED, forgotten_at=None, forgotten_reason="", in_document=True)
    )
    return {
        "forgotten": forgotten,
        "left_out": left_out,
        "returned": returned,
        "revived": revived,
    }


#: A forget's words withdraw a line that says them (the offline composer's rule too).
WITHDRAWS = frozenset({"same", "refinement"})
WITHDRAWN = "a person asked for its line to go"


def says_line(withdrawn: str, fact_text: str) -> bool:
    """A forget asking for ``withdrawn`` to go withdraws a fact saying ``fact_text``."""
    if statements.normalise(withdrawn) == statements.normalise(fact_text):
        return True
    return statements.compare(withdrawn, _AVOID_LABEL.sub("", fact_text)).verdict in WITHDRAWS


def withdrawn_by(*, memory: Memory, texts: Sequence[str], document: str) -> list[int]:
    """The live facts whose lines a person asked to go (``texts``, the forgets a pass files)
    and ``document`` no longer has: a withdrawal, never space. Read before the pass writes
    (it marks what it left out as left out)."""
    if not texts:
        return []
    lines = _Lines.of(document)
    wanted = [statements.normalise(text) for text in texts]
    candidates = (
        Fact.objects.as_system("the facts a person's forget withdrew from the document")
        .for_memory(memory)
        .filter(status=Fact.Status.FILED, valid_to__isnull=True)
        .filter(Q(in_document=True) | Q(normalized__in=wanted))
        .only("pk", "text", "normalized", "valence", "kind")
    )
    return [
        fact.pk
        for fact in candidates
        if any(says_line(text, fact.text) for text in texts) and not _says(fact, lines)
    ]


def forget_withdrawn(*, facts: Sequence[int]) -> int:
    """Forget ``facts`` (``withdrawn_by``'s): a person asked for their lines to go."""
    return Fact.objects.filter(
        pk__in=list(facts), status__in=[Fact.Status.QUEUED, Fact.Status.FILED]
    ).update(
        status=Fact.Status.FORGOTTEN,
        forgotten_at=timezone.now(),
        forgotten_reason=WITHDRAWN,
        in_document=False,
    )


# Expiry and entities the house no longer has -----------------------------------------------------


def expire_facts(*, now: datetime | None = None, among: QuerySet[Fact] | None = None) -> int:
    """Health notes and judgements past their date stop being used (status expired). ``among``:
    only these facts (a curator's selection); every memory's otherwise (the daily task)."""
    now = now or timezone.now()
    facts = Fact.objects.all() if among is None else among
    return facts.filter(
        status__in=[Fact.Status.QUEUED, Fact.Status.FILED], expires_at__lte=now
    ).update(status=Fact.Status.EXPIRED)


def set_subject_presence(*, subject: Subject, present: bool) -> None:
    """An entity left the house (its facts rest at once) or came back (they return)."""
    if subject.present == present:
        return
    subject.present = present
    subject.removed_at = None if present else timezone.now()
    subject.save(update_fields=["present", "removed_at"])
    facts = Fact.objects.filter(subjects=subject)
    if not present:
        facts.update(subject_removed=True)
        return
    # Back again: a fact rests only while one of its subjects is still gone.
    still_resting = Fact.objects.filter(subjects__present=False).values("pk")
    facts.exclude(pk__in=still_resting).update(subject_removed=False)


def purge_removed_subject_facts(*, now: datetime | None = None) -> int:
    """Delete the facts about entities gone for more than thirty days. Returns how many."""
    now = now or timezone.now()
    gone = Subject.objects.filter(present=False, removed_at__lte=now - REMOVED_SUBJECT_GRACE)
    # delete()'s total also counts the fact-subject links removed with each fact.
    _, by_model = Fact.objects.filter(subjects__in=gone).delete()
    return by_model.get(Fact._meta.label, 0)


# Two subjects that are one thing -------------------------------------------------------------


class CannotMerge(StateConflict):
    """The two subjects cannot be merged; the message says why."""


@dataclass(frozen=True)
class SubjectsMerged:
    """``merged`` (now deleted) became part of ``keep``: what followed it. The message says
    what the facts (and rules) did in ``verb``."""

    keep: Subject
    merged_name: str
    facts: int
    nicknames: tuple[str, ...]
    rules: int = 0

    verb: ClassVar[str] = "followed"

    @property
    def message(self) -> str:
        followed = [counted(self.facts, "fact")]
        if self.rules:
            followed.append(counted(self.rules, "rule"))
        added = ", ".join(f"“{n}”" for n in self.nicknames)
        nicknames = f"; it is also called {added} now" if added else ""
        return (
            f"Merged “{self.merged_name}” into “{self.keep.name}”: "
            f"{' and '.join(followed)} {self.verb}{nicknames}."
        )


def merge_subjects(*, keep: Subject, merged: Subject) -> SubjectsMerged:
    """``merged`` is the same thing as ``keep``: its facts are about ``keep`` now; its name,
    nicknames and entity id become ``keep``'s nicknames (its entity id is ``keep``'s own when
    ``keep`` has none); the devices in it are in ``keep``; then ``merged`` is deleted.

    Only this app's rows follow here. An app above that points at subjects moves its own rows
    first and calls this (``review.merging.merge_subjects``: rules, findings, guesses and
    judgements); a row left pointing at ``merged`` would lose it. Raises CannotMerge for a
    subject merged with itself or with one of another memory."""
    if keep.pk == merged.pk:
        raise CannotMerge("A subject cannot be merged with itself: choose two.")
    if keep.memory_id != merged.memory_id:
        raise CannotMerge(
            f"“{merged.name}” and “{keep.name}” are in different memories; only subjects of "
            "one memory can be merged."
        )
    links = Fact.subjects.through.objects
    with transaction.atomic():
        keep, merged = (
            Subject.objects.as_system("the two pages being merged")
            .select_for_update()
            .get(pk=keep.pk),
            Subject.objects.as_system("the two pages being merged")
            .select_for_update()
            .get(pk=merged.pk),
        )
        moved = list(links.filter(subject=merged).values_list("fact_id", flat=True))
        links.bulk_create(
            [links.model(fact_id=fact_id, subject=keep) for fact_id in moved],
            ignore_conflicts=True,  # a fact about both stays about keep, once
        )
        entity_id = merged.entity_id
        take_entity = bool(entity_id) and not keep.entity_id
        own = (keep.name, *keep.aliases, keep.entity_id or entity_id)
        known = {label.casefold() for label in own if label}
        labels = (merged.name, *merged.aliases, entity_id)
        added = list(dict.fromkeys(n.casefold() for n in labels if n and n.casefold() not in known))
        Subject.objects.filter(room=merged).exclude(pk=keep.pk).update(room=keep)
        if keep.room_id in (None, merged.pk):  # in no room, or in the one merged away
            keep.room_id = merged.room_id if merged.room_id != keep.pk else None
        merged_name = merged.name
        merged.delete()  # its fact links and its entity id go with it
        keep.aliases = [*keep.aliases, *added]
        if take_entity:
            keep.entity_id = entity_id
        keep.save(update_fields=["aliases", "entity_id", "room"])
        # A fact rests only while one of its subjects is gone: keep may be here when merged was not.
        Fact.objects.filter(pk__in=moved).update(
            subject_removed=Exists(links.filter(fact_id=OuterRef("pk"), subject__present=False))
        )
    return SubjectsMerged(keep, merged_name, len(moved), tuple(added))
