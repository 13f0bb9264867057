"""Judgements: what brain has learned about its own calls, by arithmetic over the findings.

"Night motion on the hall landing is the cat — 4 of 4 it raised were marked not a problem."
The counts are computed here, never by a model. A judgement is never written about leaks,
smoke, gas, freezing or anything protected, nor about a person's health, sleep or whereabouts;
it goes when a later finding on the same thing turns out real, and expires after thirty days
unless the arithmetic is written again.
"""

from __future__ import annotations

import re

from django.db.models import Exists, OuterRef
from django.utils import timezone

from knowledge import actions as knowledge_actions
from knowledge.kinds import JUDGEMENT_LIFETIME
from knowledge.models import Fact, Memory, Subject
from memory import actions as memory_actions
from memory.models import Origin
from memory.taught import Statement
from review.models import Finding, Judgement, Rule

AT_LEAST = 3  # marked "not a problem" this many times before brain draws a conclusion
SHARE = 0.75  # …and at least this share of what it raised
PERSONAL = re.compile(
    r"\b(health|ill|sick|sleep|sleeping|asleep|awake|bed|presence|present|"
    r"home|away|location|whereabouts|where)\b",
    re.IGNORECASE,
)
REFUTED = "a later finding on the same thing turned out real"
_SAYS_IT_IS = re.compile(r"^(?:it|that|this)(?:'s|’s| is| was)\s+", re.IGNORECASE)
_PLAIN_STARTS = {"the", "a", "an", "our", "my", "just", "normal", "fine", "expected"}


def _phrase(check_id: str) -> str:
    words = check_id.replace("_", " ").replace("-", " ").replace(".", " ").strip()
    return words[:1].upper() + words[1:]


def _as_claim(reason: str) -> str:
    """ "It's the cat." reads "the cat" after "is"; a name keeps its capital."""
    claim = _SAYS_IT_IS.sub("", reason.strip().rstrip(".!")) or reason.rstrip(".!")
    first = claim.split(" ", 1)[0]
    return claim[:1].lower() + claim[1:] if first.lower() in _PLAIN_STARTS else claim


def _about_a_person(check_id: str, subject: Subject | None, findings) -> bool:
    if subject is not None and subject.kind == Subject.Kind.PERSON:
        return True
    if subject is not None and subject.entity_id.startswith(("person.", "device_tracker.")):
        return True
    return any(PERSONAL.search(f"{_phrase(check_id)} {f.text}") for f in findings)


def recount(*, memory: Memory, check_id: str, subject: Subject | None) -> Judgement | None:
    """Work the arithmetic out again for one check on one thing; write, renew or leave it."""
    findings = list(
        Finding.objects.for_memory(memory)
        .filter(check_id=check_id, subject=subject)
        .annotate(had_rule=Exists(Rule.objects.filter(finding=OuterRef("pk"))))
    )
    if not findings or any(f.protected for f in findings):
        return None
    if _about_a_person(check_id, subject, findings):
        return None
    raised = len(findings)
    # Marked "not a problem", even if its rule was later lifted to let the check speak again.
    marked = [
        f
        for f in findings
        if f.state == Finding.State.NOT_A_PROBLEM
        or (f.state == Finding.State.LAPSED and f.had_rule)
    ]
    if len(marked) < AT_LEAST or len(marked) / raised < SHARE:
        return None
    reason = next(
        (f.reason for f in sorted(marked, key=lambda f: f.settled_at, reverse=True) if f.reason), ""
    )
    where = f" on {subject.name.lower()}" if subject is not None else ""
    claim = f"is {_as_claim(reason)}" if reason else "is usually not a problem"
    text = (
        f"{_phrase(check_id)}{where} {claim} — {len(marked)} of {raised} it raised were "
        "marked not a problem."
    )
    previous = (
        Judgement.objects.filter(
            memory=memory, check_id=check_id, subject=subject, fact__isnull=False
        )
        .select_related("fact")
        .first()
    )
    previous_fact = previous.fact if previous is not None else None  # asked for with a fact
    if previous_fact is not None and previous_fact.is_live and previous_fact.text == text:
        fact = previous_fact  # the same arithmetic again: renewed below
    else:
        # brain's own arithmetic is its own fact: it replaces its previous judgement on this
        # thing, never something a person taught.
        live_previous = (
            previous_fact if previous_fact is not None and previous_fact.is_live else None
        )
        fact = memory_actions.learn(
            Statement.derived(
                memory=memory,
                text=text,
                origin=Origin.INSIGHT,
                kind=Fact.Kind.JUDGEMENT,
                subjects=[subject.pk] if subject else [],
                verdict="contradiction" if live_previous else "novel",
                target=live_previous.pk if live_previous else None,
            )
        ).fact
    # Written again: renewed for another thirty days.
    Fact.objects.filter(pk=fact.pk).update(expires_at=timezone.now() + JUDGEMENT_LIFETIME)
    judgement, _ = Judgement.objects.update_or_create(
        memory=memory,
        check_id=check_id,
        subject=subject,
        defaults={
            "raised": raised,
            "marked_not_a_problem": len(marked),
            "fact": fact,
            "renewed_at": timezone.now(),
        },
    )
    return judgement


def refute(*, memory: Memory, check_id: str, subject: Subject | None) -> None:
    """A finding on this thing turned out real: the judgement that it is nothing goes."""
    judgement = (
        Judgement.objects.filter(memory=memory, check_id=check_id, subject=subject)
        .select_related("fact")
        .first()
    )
    if judgement is None:
        return
    if judgement.fact is not None:
        knowledge_actions.forget_fact(fact=judgement.fact, reason=REFUTED)
    judgement.delete()
