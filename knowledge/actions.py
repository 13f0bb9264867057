"""Writes to the facts store. Nothing is deleted in the ordinary course: validity closes, status
changes, and every row keeps who taught it and when. (Facts about an entity the house lost are
the exception: they are purged thirty days after it went, as the household asked.)"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.utils import timezone

from knowledge import kinds, statements
from knowledge.models import Conflict, Fact, Memory, Observation, Source, Subject

CONFIDENCE = {"high": 0.8, "medium": 0.6, "low": 0.4}
PRIOR_WEIGHT = 2  # the taught confidence counts as this many observed outcomes
REMOVED_SUBJECT_GRACE = timedelta(days=30)
LINE_GONE = "its line is no longer in the memory document"

# Sent once for every new fact row, after its transaction commits: kwargs fact, memory.
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
    subjects: list[Subject] = (),
    outcome: bool | None = None,
    embedding: list[float] | None = None,
    embedder: str = "",
) -> Fact:
    """A new fact row, queued (its candidate waits in the inbox). Announces ``brain_learned``."""
    now = timezone.now()
    prior = CONFIDENCE[confidence]
    fact = Fact.objects.create(
        memory=memory,
        text=text,
        normalized=statements.normalise(text),
        kind=kind,
        valence=Fact.Valence.FAILURE if outcome is False else Fact.Valence.FACT,
        outcome=outcome,
        channel=channel,
        taught_by=by,
        taught_by_name=by.get_username() if by is not None else "",
        source=source,
        confidence=prior,
        prior=prior,
        valid_from=now,
        expires_at=kinds.expiry_for(kind, now),
        subject_removed=any(not subject.present for subject in subjects),
        embedding=embedding,
        embedder=embedder if embedding is not None else "",
        created_at=now,
    )
    if subjects:
        fact.subjects.set(subjects)
    observe(
        fact=fact,
        kind=Observation.Kind.TAUGHT,
        text=text,
        by=by,
        channel=channel,
        source=source,
        outcome=outcome,
        when=now,
    )
    transaction.on_commit(lambda: brain_learned.send(sender=Fact, fact=fact, memory=memory))
    return fact


def observe(
    *,
    fact: Fact,
    kind: str,
    text: str,
    by=None,
    channel: str,
    source: Source | None = None,
    outcome: bool | None = None,
    when: datetime | None = None,
) -> Observation:
    """Record one time the fact was said: who, when, through what, from where."""
    return Observation.objects.create(
        fact=fact,
        kind=kind,
        text=text,
        said_by=by,
        said_by_name=by.get_username() if by is not None else "",
        channel=channel,
        source=source,
        outcome=outcome,
        created_at=when or timezone.now(),
    )


def strengthen(
    *,
    fact: Fact,
    text: str,
    by=None,
    channel: str,
    source: Source | None = None,
    outcome: bool | None = None,
) -> Fact:
    """The same thing said again: more support and an observation of its own (who, when,
    where), never more confidence (that takes outcomes) and never a new teacher."""
    Fact.objects.filter(pk=fact.pk).update(support=F("support") + 1)
    observe(
        fact=fact,
        kind=Observation.Kind.RESTATED,
        text=text,
        by=by,
        channel=channel,
        source=source,
        outcome=outcome,
    )
    fact.refresh_from_db(fields=["support"])
    return fact


def open_conflict(*, old: Fact, new: Fact, reason: str) -> Conflict:
    """Keep both and ask: ``new`` may replace ``old``, and a person settles which holds."""
    conflict, _ = Conflict.objects.get_or_create(
        old=old,
        new=new,
        state=Conflict.State.OPEN,
        defaults={"memory": new.memory, "reason": reason[:300]},
    )
    return conflict


def supersede(*, old: Fact, new: Fact) -> None:
    """Close ``old``'s validity and link it to what replaced it. Nothing is deleted, so "what
    did it believe on date D" stays answerable."""
    Fact.objects.filter(pk=old.pk, valid_to__isnull=True).update(
        valid_to=new.valid_from, superseded_by=new
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
        fact = Fact.objects.select_for_update().get(pk=fact.pk)
        if success:
            fact.successes += 1
        else:
            fact.failures += 1
        observed = fact.successes + fact.failures
        fact.confidence = round(
            (fact.prior * PRIOR_WEIGHT + fact.successes) / (PRIOR_WEIGHT + observed), 4
        )
        fact.save(update_fields=["successes", "failures", "confidence"])
    return fact


# Following the document -----------------------------------------------------------------------


def _document_lines(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            lines.append(statements.normalise(stripped.lstrip("-*+ ").strip()))
    return lines


def _says(fact: Fact, lines: set[str], line_texts: list[str]) -> bool:
    if fact.normalized in lines:
        return True
    return any(
        statements.compare(line, fact.text).verdict in {"same", "refinement"} for line in line_texts
    )


def reconcile_with_document(*, memory: Memory, text: str, filed: list[int] = ()) -> dict:
    """Make the facts follow the document after any change to it.

    ``filed``: facts whose candidates this change just filed (queued → filed). A filed fact
    whose line left the document is forgotten — except corrections and rules, which a summary
    not quoting them does not withdraw. A fact forgotten that way comes back when its line
    does (an undo). Queued facts are left alone until they have been judged.
    """
    lines = _document_lines(text)
    line_set = set(lines)
    now = timezone.now()
    if filed:
        for fact in Fact.objects.filter(pk__in=filed, status=Fact.Status.QUEUED):
            fact.status = Fact.Status.FILED
            fact.in_document = _says(fact, line_set, lines)
            fact.save(update_fields=["status", "in_document"])
    gone = [
        fact.pk
        for fact in Fact.objects.for_memory(memory)
        .filter(status=Fact.Status.FILED, in_document=True)
        .exclude(kind__in=[Fact.Kind.CORRECTION, Fact.Kind.RULE])
        if not _says(fact, line_set, lines)
    ]
    forgotten = Fact.objects.filter(pk__in=gone).update(
        status=Fact.Status.FORGOTTEN, forgotten_at=now, forgotten_reason=LINE_GONE
    )
    revived = (
        Fact.objects.for_memory(memory)
        .filter(status=Fact.Status.FORGOTTEN, forgotten_reason=LINE_GONE, normalized__in=line_set)
        .update(status=Fact.Status.FILED, forgotten_at=None, forgotten_reason="", in_document=True)
    )
    return {"forgotten": forgotten, "revived": revived}


# Expiry and entities the house no longer has -----------------------------------------------------


def expire_facts(*, now: datetime | None = None) -> int:
    """Health notes and judgements past their date stop being used (status expired)."""
    now = now or timezone.now()
    return Fact.objects.filter(
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
