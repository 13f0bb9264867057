"""Why does brain think that? The whole chain behind one fact."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from knowledge.models import Fact, Source


def _when(value) -> str | None:
    return value.isoformat() if value else None


def explain(fact: Fact, *, reader) -> dict:
    """Who taught it, when, through what, from which source; every later time it was said
    again (by whom, when, from where); the episodes it was distilled from; what it replaced
    and what replaced it; its outcomes; and whether it is still believed, with the reason when
    it is not — all as ``reader`` (who reads ``fact``) may read it: a time it was said in a
    source they may not read is left out, and a fact it replaced or that replaced it that they
    may not read is named by neither id nor words."""
    observations = list(
        fact.observations.readable_by(reader)
        .select_related("source", "episode")
        .order_by("created_at", "pk")
    )
    readable = Fact.objects.readable_by(reader)
    chain: list[dict[str, Any]] = []
    older = readable.filter(superseded_by=fact).order_by("-valid_from").first()
    while older is not None and len(chain) < 50:
        chain.append(
            {
                "id": older.pk,
                "text": older.text,
                "valid_from": _when(older.valid_from),
                "valid_to": _when(older.valid_to),
            }
        )
        older = readable.filter(superseded_by=older).order_by("-valid_from").first()
    source = fact.source
    if source is not None and not Source.objects.readable_by(reader).filter(pk=source.pk).exists():
        source = None  # taught from a source they may not read (a passage relabelled since)
    successor = None
    if fact.superseded_by_id:
        successor = readable.filter(pk=fact.superseded_by_id).first()
    return {
        "id": fact.pk,
        "text": fact.text,
        "kind": fact.kind,
        "valence": fact.valence,
        "status": fact.status,
        "believed": fact.is_live,
        "why_not": _why_not(fact, successor),
        "document": _in_document(fact),
        "taught_by": fact.taught_by_name or None,
        "channel": fact.channel,
        "taught_at": _when(fact.created_at),
        "source": {
            "id": source.pk,
            "kind": source.kind,
            "title": source.title,
            "reference": source.reference,
            "url": f"{reverse('knowledge:source', args=[source.pk])}?fact={fact.pk}",
            "turn": _taught_at(observations, source),
        }
        if source
        else None,
        "subjects": [
            {
                "id": s.pk,
                "name": s.name,
                "kind": s.kind,
                "entity_id": s.entity_id,
                "present": s.present,
            }
            for s in fact.subjects.all()
        ],
        "observations": [
            {
                "kind": observation.kind,
                "text": observation.text,
                "said_by": observation.said_by_name or None,
                "channel": observation.channel,
                "said_at": _when(observation.created_at),
                "outcome": observation.outcome,
                "source": {"id": observation.source_id, "title": observation.source.title}
                if observation.source is not None
                else None,
                "episode": observation.episode_id,
                "turn": observation.turn,
            }
            for observation in observations
        ],
        "episodes": [
            {
                "id": observation.episode.pk,
                "text": observation.episode.text,
                "outcome": observation.episode.outcome,
                "occurred_at": _when(observation.episode.occurred_at),
            }
            for observation in observations
            if observation.episode is not None
        ],
        "confidence": fact.confidence,
        "taught_with_confidence": fact.prior,
        "support": fact.support,
        "outcomes": {"successes": fact.successes, "failures": fact.failures},
        "valid_from": _when(fact.valid_from),
        "valid_to": _when(fact.valid_to),
        "superseded_by": {"id": successor.pk, "text": successor.text} if successor else None,
        "supersedes": chain,
        "expires_at": _when(fact.expires_at),
    }


def _taught_at(observations, source) -> int | None:
    """The turn of the conversation ``source`` that first said the fact, or None."""
    return next(
        (o.turn for o in observations if o.source_id == source.pk and o.turn is not None), None
    )


LEFT_OUT = "not in the document: left out for space"


def _in_document(fact: Fact) -> str | None:
    """Where a believed fact stands with the memory document, in words (None when it is not
    believed: ``why_not`` says why). The document is a summary: a line a pass left out to fit
    the cap does not stop the fact being known and recalled."""
    if not fact.is_live:
        return None
    if fact.status == Fact.Status.QUEUED:
        return "not in the document yet: waiting to be filed"
    return "in the document" if fact.in_document else LEFT_OUT


def _why_not(fact: Fact, successor: Fact | None) -> str | None:
    if fact.superseded_by_id:
        by = f"fact #{successor.pk}" if successor is not None else "a newer statement"
        return f"replaced by {by} on {fact.valid_to:%Y-%m-%d}"
    if fact.status == Fact.Status.FORGOTTEN:
        return f"forgotten: {fact.forgotten_reason}" if fact.forgotten_reason else "forgotten"
    if fact.status == Fact.Status.EXPIRED:
        return f"expired on {fact.expires_at:%Y-%m-%d}"
    if fact.status == Fact.Status.RETIRED:
        when = f"retired on {fact.valid_to:%Y-%m-%d}" if fact.valid_to else "retired"
        return f"{when}: {fact.forgotten_reason}" if fact.forgotten_reason else when
    if fact.subject_removed:
        return "it is about something the house no longer has"
    return None
