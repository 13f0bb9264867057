"""Pages as a reader sees them: a subject's facts and the links they make, through the read
rules (visibility.py).

A page exists for a reader when they can read one of its facts, and shows only those. A link is
never stored: it exists while a fact on one page names another page (its name, a nickname or
its entity id, as ``knowledge.subjects`` finds names in text), and a reader sees it when they
can read that fact and the other page exists for them. Editing or forgetting the fact changes
the link with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from knowledge.models import Fact, Subject
from knowledge.subjects import mentioned_ids


@dataclass(frozen=True)
class Link:
    fact: Fact
    page: Subject


@dataclass
class Page:
    subject: Subject
    facts: list[Fact] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)


def readable_pages(memory, reader):
    """The pages of ``memory`` that exist for ``reader``, by name."""
    return Subject.objects.for_memory(memory).readable_by(reader).order_by("name", "pk")


def page(subject: Subject, reader, *, live: bool = True) -> Page | None:
    """``subject`` as ``reader`` sees it, or None when the page does not exist for them."""
    facts = Fact.objects.filter(subjects=subject).readable_by(reader).without_vectors()
    if live:
        facts = facts.live()
    shown = list(facts.order_by("created_at", "pk"))
    if not shown and not Fact.objects.filter(subjects=subject).readable_by(reader).exists():
        return None
    return Page(subject, shown, links_of(subject, shown, reader))


def ended(subject: Subject, reader) -> list[Fact]:
    """Facts of ``subject``'s page ``reader`` reads that were true until a day and are not any
    more, though nothing replaced them (a conflict kept both with their dates): they read
    "until" that day, newest first."""
    facts = Fact.objects.filter(subjects=subject).readable_by(reader).without_vectors()
    return list(
        facts.filter(
            status__in=[Fact.Status.QUEUED, Fact.Status.FILED],
            valid_to__isnull=False,
            superseded_by__isnull=True,
        ).order_by("-valid_to", "-pk")
    )


def links_of(subject: Subject, facts: list[Fact], reader) -> list[Link]:
    """The links ``facts`` (on ``subject``'s page, readable by ``reader``) make to other
    pages that exist for ``reader``."""
    named = {fact.pk: mentioned_ids(subject.memory, fact.text) for fact in facts}
    others = {pk for pks in named.values() for pk in pks if pk != subject.pk}
    existing = {
        other.pk: other for other in Subject.objects.filter(pk__in=others).readable_by(reader)
    }
    return [Link(fact, existing[pk]) for fact in facts for pk in named[fact.pk] if pk in existing]
