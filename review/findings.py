"""A finding's life: raised by a house check, settled by a person (fixed, or not a problem
with a rule the checks read), lapsed when a fix holds, and raised again when it comes back.

The limits are enforced here, in code, whatever a check or a model proposes: leaks, smoke, gas
and freezing are raised whatever a rule says and never silenced beyond one sensor, and a rule
for a room or everywhere is made only once confirmed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from knowledge.models import Memory, Subject
from review import judgements, timeline
from review.models import (
    MAX_REASON,
    MAX_TEXT,
    SUPPRESSION_LAPSES_AFTER,
    Event,
    Finding,
    Rule,
    Severity,
)

PROTECTED_WORDS = re.compile(
    r"\b(leak|leaking|water|flood|smoke|fire|gas|co2?|carbon monoxide|"
    r"freeze|freezing|frost)\b",
    re.IGNORECASE,
)
UNTIL_CHOICES = {"good": None, "month": timedelta(days=30), "season": timedelta(days=91)}


class Refused(StateConflict):
    """Not done; the message says why (already settled, a wide rule not confirmed, a protected
    finding silenced beyond its sensor)."""


def _clean(text: str, what: str, limit: int = MAX_TEXT) -> str:
    text = " ".join((text or "").split())
    if not text:
        raise ValidationError(f"The {what} can't be empty.")
    if len(text) > limit:
        raise ValidationError(f"The {what} is {len(text):,} characters; the limit is {limit:,}.")
    return text


def _subject_for(memory: Memory, entity_id: str) -> Subject:
    subject = (
        Subject.objects.as_system("the subject a house check names")
        .for_memory(memory)
        .filter(entity_id=entity_id)
        .first()
    )
    if subject is None:
        raise ValidationError(
            f"{memory.name} has no entity {entity_id!r}: load it first (brain entities load, or "
            "the Home Assistant sync), or send the finding without an entity_id."
        )
    return subject


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
            timeline.record(
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
        timeline.record(
            memory, Event.Kind.FINDING, text, {"finding": finding.pk, "severity": severity}
        )
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
