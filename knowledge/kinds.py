"""What kind of fact a statement is, and how long it stays true."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from knowledge.models import Fact

HEALTH_NOTE_LIFETIME = timedelta(days=30)  # "the hall sensor's battery is at 12%"
JUDGEMENT_LIFETIME = timedelta(days=30)  # renewed when the arithmetic is written again

_HEALTH = re.compile(
    r"\b(battery|batteries|signal|offline|unavailable|low on|firmware|needs? (replacing|a new)|"
    r"\d+\s?% (charge|battery)|dropping out|keeps dropping)\b",
    re.IGNORECASE,
)
_NICKNAME = re.compile(r"\b(means|is called|we call|known as|nickname|refers to)\b", re.I)
_RULE = re.compile(r"^\s*(never|always|don't|do not|only)\b|\bwithout asking\b", re.I)
_PREFERENCE = re.compile(r"\b(prefers?|likes?|loves?|hates?|wants?|dislikes?|rather)\b", re.I)
_ROUTINE = re.compile(
    r"\b(every|each|on weekdays|weekends?|at \d{1,2}(:\d\d)?|mornings?|"
    r"evenings?|nightly|daily)\b",
    re.I,
)
_QUIRK = re.compile(
    r"\b(quirk|is normal|not a fault|reads? (high|low)|false alarm|by itself)\b", re.I
)


def kind_for(text: str, *, correction: bool = False) -> str:
    if correction:
        return Fact.Kind.CORRECTION
    for pattern, kind in (
        (_RULE, Fact.Kind.RULE),
        (_NICKNAME, Fact.Kind.NICKNAME),
        (_HEALTH, Fact.Kind.HEALTH_NOTE),
        (_QUIRK, Fact.Kind.QUIRK),
        (_PREFERENCE, Fact.Kind.PREFERENCE),
        (_ROUTINE, Fact.Kind.ROUTINE),
    ):
        if pattern.search(text):
            return kind
    return Fact.Kind.NOTE


def expiry_for(kind: str, now: datetime) -> datetime | None:
    if kind == Fact.Kind.HEALTH_NOTE:
        return now + HEALTH_NOTE_LIFETIME
    if kind == Fact.Kind.JUDGEMENT:
        return now + JUDGEMENT_LIFETIME
    return None
