"""Writes for what waits on a person: findings, the rules they set, and the guesses they answer.

The limits are enforced here, in code, whatever a model proposes: three open guesses at most,
a fortnight each, and never again anything already confirmed or rejected, in any wording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from knowledge import statements
from knowledge.embedding import cosine, get_embedder
from knowledge.models import Memory, Subject
from memory import actions as memory_actions
from memory.models import Origin
from review import judgements
from review.models import (
    GUESS_LIFETIME,
    OPEN_GUESSES_AT_MOST,
    SUPPRESSION_LAPSES_AFTER,
    Event,
    Finding,
    Guess,
    Rule,
    Severity,
)

MAX_TEXT = 1000
MAX_REASON = 300
PROTECTED_WORDS = re.compile(
    r"\b(leak|leaking|water|flood|smoke|fire|gas|co2?|carbon monoxide|"
    r"freeze|freezing|frost)\b",
    re.IGNORECASE,
)
PARAPHRASE_COSINE = 0.85  # guesses this close in meaning are the same question
SLEEP_FOR = timedelta(days=7)  # a dismissed guess comes back after this, when a slot is free
UNTIL_CHOICES = {"good": None, "month": timedelta(days=30), "season": timedelta(days=91)}


class Refused(Exception):
    """Not done; the message says why (already answered, unknown id, wide rule unconfirmed)."""


def _clean(text: str, what: str, limit: int = MAX_TEXT) -> str:
    text = " ".join((text or "").split())
    if not text:
        raise ValidationError(f"The {what} can't be empty.")
    if len(text) > limit:
        raise ValidationError(f"The {what} is {len(text):,} characters; the limit is {limit:,}.")
    return text


def _subject_for(memory: Memory, entity_id: str) -> Subject:
    subject = Subject.objects.for_memory(memory).filter(entity_id=entity_id).first()
    if subject is None:
        raise ValidationError(
            f"{memory.name} has no entity {entity_id!r}: load it first (brain entities load, or "
            "the Home Assistant sync), or send the finding without an entity_id."
        )
    return subject


# Findings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raised:
    finding: Finding | None
    outcome: str  # new | again | returned | quiet
    message: str


@retry_transaction
def raise_finding(
    *,
    memory: Memory,
    check_id: str,
    text: str,
    severity: str,
    entity_id: str = "",
    is_todo: bool = False,
    protected: bool = False,
) -> Raised:
    """A house check reports a problem. Rules keep it quiet; a fixed one that comes back is
    raised again saying how long it stayed away; one already open is counted, not repeated."""
    check_id = _clean(check_id, "check id", 100)
    text = _clean(text, "finding")
    if severity not in Severity.values:
        raise ValidationError(f"severity must be high, medium or low, not {severity!r}.")
    subject = _subject_for(memory, entity_id) if entity_id else None
    # "water_leak" is about a leak: \b does not split words at an underscore.
    protected = protected or bool(PROTECTED_WORDS.search(f"{check_id.replace('_', ' ')} {text}"))
    now = timezone.now()
    with transaction.atomic():
        # One check at a time per memory: two first raises at once make one finding.
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        rule = next(
            (
                r
                for r in Rule.objects.for_memory(memory).active().select_related("room")
                if r.covers(check_id=check_id, subject=subject, entity_id=entity_id)
            ),
            None,
        )
        # Leaks, smoke, gas and freezing are raised every time, whatever a rule says.
        if rule is not None and not protected:
            return Raised(None, "quiet", f"Not raised: rule #{rule.pk} ({rule.describe()}).")
        existing = (
            Finding.objects.for_memory(memory)
            .select_for_update()
            .filter(check_id=check_id, entity_id=entity_id)
            .exclude(state__in=[Finding.State.LAPSED, Finding.State.NOT_A_PROBLEM])
            .order_by("-last_raised_at")
            .first()
        )
        if existing is not None and existing.state == Finding.State.OPEN:
            existing.times_raised += 1
            existing.last_raised_at, existing.text, existing.severity = now, text, severity
            existing.save(update_fields=["times_raised", "last_raised_at", "text", "severity"])
            return Raised(
                existing, "again", f"Already waiting on you (raised {existing.times_raised} times)."
            )
        if existing is not None:  # fixed, and it came back: news, not a decision reopened
            existing.stayed_away = now - existing.settled_at
            existing.state, existing.settled_how = Finding.State.OPEN, ""
            existing.times_raised += 1
            existing.last_raised_at, existing.text, existing.severity = now, text, severity
            existing.suppressed_until = existing.settled_at = None
            existing.save(
                update_fields=[
                    "stayed_away",
                    "state",
                    "settled_how",
                    "times_raised",
                    "last_raised_at",
                    "text",
                    "severity",
                    "suppressed_until",
                    "settled_at",
                ]
            )
            judgements.refute(memory=memory, check_id=check_id, subject=subject)
            _event(
                memory,
                Event.Kind.FINDING,
                f"{text} ({existing.returned_after})",
                {"finding": existing.pk, "severity": severity, "returned": True},
            )
            return Raised(existing, "returned", f"Raised again: {existing.returned_after}.")
        finding = Finding.objects.create(
            memory=memory,
            check_id=check_id,
            subject=subject,
            entity_id=entity_id,
            severity=severity,
            text=text,
            is_todo=is_todo,
            protected=protected,
            first_raised_at=now,
            last_raised_at=now,
        )
        _event(memory, Event.Kind.FINDING, text, {"finding": finding.pk, "severity": severity})
        return Raised(finding, "new", "Raised.")


def _settle(finding: Finding, state: str, by, *, how: str = "", reason: str = "") -> Finding:
    with transaction.atomic():
        locked = Finding.objects.select_for_update().get(pk=finding.pk)
        if locked.state != Finding.State.OPEN:
            raise Refused(f"That finding was already settled ({locked.get_state_display()}).")
        now = timezone.now()
        locked.state, locked.settled_how, locked.settled_at = state, how, now
        locked.settled_by, locked.reason = by, reason
        if state == Finding.State.SUPPRESSED:
            locked.suppressed_until = now + SUPPRESSION_LAPSES_AFTER
        locked.save()
    return locked


def not_a_problem(
    *,
    finding: Finding,
    by=None,
    reason: str = "",
    scope: str = Rule.Scope.SENSOR,
    until: str | datetime = "good",
    confirmed: bool = False,
) -> Rule:
    """The check was wrong here: a rule it reads on its next pass. Wide scopes (the room,
    everywhere) must be confirmed. Two checks marked wrong on one sensor are two rules."""
    reason = " ".join((reason or "").split())[:MAX_REASON]
    if scope not in Rule.Scope.values:
        raise ValidationError(f"scope must be one of {', '.join(Rule.Scope.values)}.")
    if finding.protected and scope != Rule.Scope.SENSOR:
        raise Refused("Leaks, smoke, gas and freezing are never silenced beyond one sensor.")
    if scope in (Rule.Scope.ROOM, Rule.Scope.EVERYWHERE) and not confirmed:
        raise Refused(f"A rule for {Rule.Scope(scope).label} is wide: confirm it to make it.")
    until_at = _until(until)
    with transaction.atomic():
        settled = _settle(finding, Finding.State.NOT_A_PROBLEM, by, reason=reason)
        room = (
            settled.subject.room
            if settled.subject and settled.subject.room_id
            else (settled.subject if settled.subject and settled.subject.kind == "room" else None)
        )
        if scope == Rule.Scope.ROOM and room is None:
            raise Refused("This finding is not about anything in a known room.")
        rule = Rule.objects.create(
            memory=settled.memory,
            check_id=settled.check_id,
            scope=scope,
            subject=settled.subject,
            entity_id=settled.entity_id,
            room=room,
            until=until_at,
            reason=reason,
            origin=Rule.Origin.NOT_A_PROBLEM,
            finding=settled,
            created_by=by,
        )
        judgements.recount(
            memory=settled.memory, check_id=settled.check_id, subject=settled.subject
        )
    return rule


def _until(until: str | datetime) -> datetime | None:
    if isinstance(until, datetime):
        if until <= timezone.now():
            raise ValidationError("until must be in the future.")
        return until
    if until not in UNTIL_CHOICES:
        raise ValidationError("until must be good, month, season or a date.")
    delta = UNTIL_CHOICES[until]
    return timezone.now() + delta if delta else None


def mark_fixed(*, finding: Finding, how: str = Finding.Settled.FIXED, by=None) -> Finding:
    """ "I've already fixed it", "Got it" or a finished to-do: quiet only while it stays fixed."""
    if how not in Finding.Settled.values:
        raise ValidationError(f"how must be one of {', '.join(Finding.Settled.values)}.")
    settled = _settle(finding, Finding.State.SUPPRESSED, by, how=how)
    judgements.refute(memory=settled.memory, check_id=settled.check_id, subject=settled.subject)
    return settled


def remove_rule(*, rule: Rule, by=None) -> None:
    """Undo / Let brain raise it again: the rule is gone; its finding may be raised again."""
    Rule.objects.filter(pk=rule.pk, removed_at__isnull=True).update(removed_at=timezone.now())
    if rule.finding_id:
        Finding.objects.filter(pk=rule.finding_id, state=Finding.State.NOT_A_PROBLEM).update(
            state=Finding.State.LAPSED
        )


def lapse_suppressions(*, now: datetime | None = None) -> int:
    """A fix that held for ninety days closes the finding."""
    now = now or timezone.now()
    return Finding.objects.filter(state=Finding.State.SUPPRESSED, suppressed_until__lte=now).update(
        state=Finding.State.LAPSED
    )


# Guesses -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proposed:
    guess: Guess | None
    message: str


def _same_question(
    a: Guess, text: str, vector: list[float], embedder: str, subject: Subject | None
) -> bool:
    verdict = statements.compare(a.text, text).verdict
    if verdict in {"same", "refinement", "contradiction"}:  # "X?" and "not X?" ask one thing
        return True
    if a.subject_id and subject is not None and a.subject_id != subject.pk:
        return False  # close in meaning, but about another thing: the kitchen fridge, not ours
    return (
        a.embedding is not None
        and a.embedder == embedder
        and cosine(list(a.embedding), vector) >= PARAPHRASE_COSINE
    )


@retry_transaction
def propose_guess(
    *, memory: Memory, text: str, why: str = "", subject: Subject | None = None
) -> Proposed:
    """Offer a guess, within the limits: never one already answered (in any wording), never a
    second copy of one pending; with three open it waits for a free slot, and costs nothing
    more to offer then."""
    text = _clean(text, "guess").rstrip("?").removesuffix("— right").strip(" —")
    embedder = get_embedder()
    vector = embedder.embed_one(text)
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        for earlier in Guess.objects.for_memory(memory).exclude(state=Guess.State.EXPIRED):
            if _same_question(earlier, text, vector, embedder.name, subject):
                if earlier.state in (Guess.State.CONFIRMED, Guess.State.REJECTED):
                    return Proposed(
                        None, f"Not asked: it was already {earlier.state} (“{earlier.text}”)."
                    )
                return Proposed(
                    None, f"Not asked: the same question is pending (“{earlier.text}”)."
                )
        guess = Guess.objects.create(
            memory=memory,
            text=text,
            normalized=statements.normalise(text),
            embedding=vector,
            embedder=embedder.name,
            why=why[:300],
            subject=subject,
        )
        _offer_waiting(memory)
    guess.refresh_from_db()
    if guess.state == Guess.State.OPEN:
        return Proposed(guess, "Asked.")
    return Proposed(
        guess, f"Worked out; it waits for a free slot ({OPEN_GUESSES_AT_MOST} are open)."
    )


def _offer_waiting(memory: Memory, now: datetime | None = None) -> None:
    """Fill free slots: sleeping guesses whose rest is over first, then waiting ones, oldest
    first. Call inside a transaction holding the memory row."""
    now = now or timezone.now()
    free = OPEN_GUESSES_AT_MOST - Guess.objects.for_memory(memory).open().count()
    if free <= 0:
        return
    rested = list(
        Guess.objects.for_memory(memory)
        .filter(state=Guess.State.SLEEPING, slept_at__lte=now - SLEEP_FOR)
        .order_by("slept_at")[:free]
    )
    waiting = list(
        Guess.objects.for_memory(memory)
        .filter(state=Guess.State.WAITING)
        .order_by("created_at", "pk")[: free - len(rested)]
    )
    for guess in rested + waiting:
        guess.state, guess.offered_at = Guess.State.OPEN, now
        guess.expires_at = now + GUESS_LIFETIME  # its fortnight starts again
        guess.save(update_fields=["state", "offered_at", "expires_at"])


@dataclass(frozen=True)
class Answered:
    guess: Guess
    message: str


@retry_transaction
def answer_guess(*, guess: Guess, answer: str, by=None, reason: str = "") -> Answered:
    """Yes files it as a plain memory line; no closes it for good and keeps the reason as a
    correction. One person wins when two answer at once; the other is told."""
    word = re.match(r"(yes|no)\b", (answer or "").strip().lower())  # "not sure" is neither
    if word is None:
        raise ValidationError("Start the answer with yes or no.")
    yes = word.group(1) == "yes"
    reason = reason or re.sub(r"^(yes|no)\b[\s,.:;!-]*", "", answer.strip(), flags=re.I)
    reason = " ".join(reason.split())[:MAX_REASON]
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=guess.memory_id).first()
        locked = Guess.objects.select_for_update().get(pk=guess.pk)
        if locked.state not in (Guess.State.OPEN, Guess.State.SLEEPING, Guess.State.WAITING):
            who = f" by {locked.answered_by}" if locked.answered_by else ""
            raise Refused(f"That guess was already {locked.state}{who}.")
        locked.answered_at, locked.answered_by, locked.reason = timezone.now(), by, reason
        if yes:
            learned = memory_actions.learn(
                memory=locked.memory,
                text=locked.text,
                origin=Origin.TYPED,
                by=by,
                confidence="high",
            )
            locked.state, locked.fact = Guess.State.CONFIRMED, learned.fact
            message = "Filed as known."
        else:
            locked.state = Guess.State.REJECTED
            message = "Noted: brain won't ask that again."
            if reason:
                memory_actions.learn(
                    memory=locked.memory, text=reason, origin=Origin.CORRECTION, by=by
                )
                message += " Your reason is kept as a correction."
        locked.save()
        _offer_waiting(locked.memory)
    return Answered(locked, message)


@retry_transaction
def dismiss_guess(*, guess: Guess, by=None) -> Guess:
    """Put it to sleep: off every screen, not counted, back later with a fresh fortnight."""
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=guess.memory_id).first()
        locked = Guess.objects.select_for_update().get(pk=guess.pk)
        if locked.state != Guess.State.OPEN:
            raise Refused(f"That guess is {locked.get_state_display()}, not open.")
        locked.state, locked.slept_at = Guess.State.SLEEPING, timezone.now()
        locked.save(update_fields=["state", "slept_at"])
        _offer_waiting(locked.memory)
    return locked


def tend_guesses(*, now: datetime | None = None) -> None:
    """Daily: expire unanswered guesses past their fortnight, wake rested ones, fill slots."""
    now = now or timezone.now()
    Guess.objects.filter(state=Guess.State.OPEN, expires_at__lte=now).update(
        state=Guess.State.EXPIRED
    )
    for memory in Memory.objects.all():
        _fill_slots(memory, now)


@retry_transaction
def _fill_slots(memory: Memory, now: datetime) -> None:
    """Offer waiting guesses into one memory's free slots, under its lock."""
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        _offer_waiting(memory, now)


# The timeline --------------------------------------------------------------------------------


def _event(memory: Memory, kind: str, text: str, data: dict) -> Event:
    event = Event.objects.create(memory=memory, kind=kind, text=text, data=data)
    from review import timeline  # pushes to Home Assistant after commit, when configured

    timeline.push_after_commit(event)
    return event


def record_learned(*, fact, memory: Memory) -> Event:
    return _event(memory, Event.Kind.LEARNED, f"brain learned: {fact.text}", {"fact": fact.pk})
