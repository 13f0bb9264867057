"""Forgetting for agent memory: decay and pruning. Both retire — the fact's validity closes now,
its status is ``retired`` and the reason is kept (``forgotten_reason``) — and never delete, so
"what was believed last Tuesday, and why" stays answerable (``Fact.objects.as_of``).

Which beliefs: only those with an episode among their evidence (distilled by the sleep pass or
by the agent, or written with ``memory_write``). What a person typed, said or imported is
theirs to forget: a household's facts never go stale by themselves.

Decay retires a belief that is all of:

- stale: not observed (said again, in any words the gate took as the same) for DECAY_AFTER,
  60 days. Two months is two cycles of the slowest routine agents commonly see (a monthly
  report, a billing run): anything still true and still in play is seen again in that time.
- never used: no outcome was ever reported for it. An outcome is the one evidence of use;
  being retrieved is not, so a search never keeps a belief alive (reads write nothing).
- single support: said once. Anything said twice has been confirmed by a second observation.
- not confident: confidence under PROTECTED_CONFIDENCE (0.8, what "high" teaches): a belief
  taught as certain is left to a person.
- not a failure, a rule or a correction. An avoided failure is never repeated, so it is never
  said again nor used — staleness is the sign the lesson works, not that it is obsolete.

Pruning caps the beliefs scored by outcomes (at least one success or failure reported: the
guidelines experience wrote) at ``keep`` per class (failures and facts apart, so a run of
successes can never push out a lesson), retiring the lowest utility (``retrieval.utility``:
0.7 × confidence + 0.3 × proven use). A belief with confidence ≥ PROTECTED_CONFIDENCE and at
least PROTECTED_SUCCESSES (5) successes is proven and never pruned: under the Laplace rule
five successes and no failure are what it takes to pass 0.8 from the medium prior, so the
two thresholds together mean "it has worked, repeatedly, and hardly ever failed". ``keep``
defaults to 20: a 600-token block shows about 20 lines, so more scored guidelines than that
only compete with each other for the same places.

A retired belief's line leaves the memory document at the next filing (a queued one never
reaches it), as a forgotten fact's does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q

from knowledge import retrieval
from knowledge.models import Fact, Memory, Observation
from memory import actions as memory_actions
from memory.models import InboxItem, Origin

DECAY_AFTER = timedelta(days=60)
PROTECTED_CONFIDENCE = 0.8
PROTECTED_SUCCESSES = 5
PRUNE_KEEP = 20
KEEP_RANGE = (1, 1000)


def agent_beliefs(memory: Memory):
    """The live beliefs of ``memory`` with an episode among their evidence."""
    from_episodes = Observation.objects.filter(fact=OuterRef("pk"), episode__isnull=False)
    return (
        Fact.objects.as_system("forgetting weighs every belief an agent formed")
        .for_memory(memory)
        .live()
        .filter(Exists(from_episodes))
    )


def stale(memory: Memory, *, now: datetime) -> list[Fact]:
    """The beliefs decay retires now (the rule in the module docstring), oldest first."""
    return list(
        agent_beliefs(memory)
        .filter(support=1, successes=0, failures=0, confidence__lt=PROTECTED_CONFIDENCE)
        .exclude(valence=Fact.Valence.FAILURE)
        .exclude(kind__in=[Fact.Kind.RULE, Fact.Kind.CORRECTION])
        .annotate(last_seen=Max("observations__created_at"))
        .filter(last_seen__lt=now - DECAY_AFTER)
        .without_vectors()
        .order_by("last_seen", "pk")
    )


def beyond_the_cap(memory: Memory, *, keep: int) -> tuple[list[Fact], int]:
    """The scored beliefs pruning retires, least useful first, and how many are scored."""
    scored = list(
        agent_beliefs(memory)
        .filter(Q(successes__gt=0) | Q(failures__gt=0))
        .without_vectors()
        .order_by("pk")
    )
    retire = []
    for valence in (Fact.Valence.FAILURE, Fact.Valence.FACT):
        in_class = sorted(
            (fact for fact in scored if fact.valence == valence),
            key=lambda fact: (retrieval.utility(fact), fact.pk),
        )
        excess = len(in_class) - keep
        for fact in in_class:
            if excess <= 0:
                break
            if fact.confidence >= PROTECTED_CONFIDENCE and fact.successes >= PROTECTED_SUCCESSES:
                continue
            retire.append(fact)
            excess -= 1
    return retire, len(scored)


def retire(facts: list[Fact], *, reason: str, now: datetime) -> list[Fact]:
    """Take ``facts`` out of use (the ones still live), with ``reason``; returns those retired.
    A queued one's waiting line is dropped; a filed one's line leaves the document at the next
    filing."""
    retired = []
    with transaction.atomic():
        for fact in facts:
            done = (
                Fact.objects.as_system("forgetting weighs every belief an agent formed")
                .filter(
                    pk=fact.pk, status__in=[Fact.Status.QUEUED, Fact.Status.FILED], valid_to=None
                )
                .update(status=Fact.Status.RETIRED, valid_to=now, forgotten_reason=reason[:300])
            )
            if not done:
                continue
            InboxItem.objects.filter(fact=fact, state=InboxItem.State.PENDING).update(
                state=InboxItem.State.DROPPED, settled_at=now
            )
            if fact.status == Fact.Status.FILED and fact.in_document:
                memory_actions.add_to_inbox(
                    memory=fact.memory,
                    text=fact.text,
                    origin=Origin.API,
                    action=InboxItem.Action.FORGET,
                )
            fact.status, fact.valid_to, fact.forgotten_reason = Fact.Status.RETIRED, now, reason
            retired.append(fact)
    return retired


def decay_reason() -> str:
    return f"not used or said again in {DECAY_AFTER.days} days"


def prune_reason(keep: int) -> str:
    return f"among the least useful of the guidelines scored by outcomes, beyond the {keep} kept"
