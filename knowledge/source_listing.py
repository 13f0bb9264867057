"""The Sources list: what each source holds, and finding one.

A row says its channel (the source's kind), who said it, when, the first words of its text and
how many live facts cite it. "Cite" is an observation from that source: the teaching, or a
restatement by someone else later, so a conversation that confirmed three facts counts three
though it taught none of them. "Who" is the first person heard in it (brain, for its own runs).

The rules:

- A reader sees a source when they may read one of its passages (``Source.objects.readable_by``,
  knowledge/visibility.py), and its counts are of readable live facts only; words are searched
  in its title and in the passages they may read, never in masked text.
- Filters: ``kind`` (one of Source.Kind), ``person`` (a name heard in it), ``q`` (words in its
  title or text, case-insensitive). A value that cannot be used raises BadFilter naming it.
- One query for the page's rows whatever their number (the counts and the name are
  subqueries, never one query per row), one for the total, one for the people to filter by.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from knowledge.models import Fact, Memory, Observation, Passage, Source

MAX_SEARCH_CHARS = 200
# A source's channel in plain words (the kind's own labels would say "Api").
CHANNEL_WORDS = {
    Source.Kind.CONVERSATION: "conversation",
    Source.Kind.TYPED: "typed on a page",
    Source.Kind.TERMINAL: "the terminal",
    Source.Kind.API: "the API",
    Source.Kind.INSIGHT: "insight run",
    Source.Kind.STUDY: "study session",
    Source.Kind.IMPORT: "import",
    Source.Kind.NOTE: "note",
    Source.Kind.DOCUMENT: "document",
    Source.Kind.EMAIL: "email",
}
CHANNELS = [(kind.value, CHANNEL_WORDS[kind]) for kind in Source.Kind]
FIRST_WORDS = 24  # enough to say what it was about, short enough to scan a page of them


class BadFilter(ValueError):
    """A filter value that cannot be used; the message names it and what would work."""


@dataclass(frozen=True)
class SourceFilters:
    q: str = ""
    kind: str = ""
    person: str = ""

    @classmethod
    def from_query(cls, params) -> SourceFilters:
        q = " ".join(params.get("q", "").split())
        if len(q) > MAX_SEARCH_CHARS:
            raise BadFilter(f"Search for at most {MAX_SEARCH_CHARS} characters.")
        kind = params.get("kind", "").strip()
        if kind and kind not in Source.Kind.values:
            raise BadFilter(
                f"There is no channel called {kind!r}: use one of {', '.join(Source.Kind.values)}."
            )
        return cls(q=q, kind=kind, person=params.get("person", "").strip()[:150])

    @property
    def active(self) -> bool:
        return bool(self.q or self.kind or self.person)


def sources_for(memory: Memory, reader, filters: SourceFilters) -> QuerySet[Source]:
    """The sources ``reader`` may see in ``memory``, filtered, newest first, each with
    ``live_facts`` and ``who``."""
    readable = Fact.objects.for_memory(memory).readable_by(reader)
    heard = Observation.objects.filter(source=OuterRef("pk"), fact__in=readable)
    live_citing = (
        Observation.objects.filter(source=OuterRef("pk"), fact__in=readable.live())
        .order_by()
        .values("source")
        .annotate(count=Count("fact", distinct=True))
        .values("count")
    )
    readable_passages = Passage.objects.readable_by(reader).filter(source=OuterRef("pk"))
    unreadable = Passage.objects.filter(source=OuterRef("pk")).exclude(
        pk__in=Passage.objects.readable_by(reader).values("pk")
    )
    first_voice = (
        heard.exclude(said_by_name="").order_by("created_at", "pk").values("said_by_name")[:1]
    )
    listed = (
        Source.objects.filter(memory=memory)
        .readable_by(reader)  # one passage they may read lists it (knowledge/visibility.py)
        .annotate(
            live_facts=Coalesce(Subquery(live_citing, output_field=IntegerField()), Value(0)),
            who=Coalesce(Subquery(first_voice), Value("")),
            # Its first words: of its text when the reader reads every passage of it, else of
            # the first passage they may read (visibility.masked_text), never masked words.
            opening=Case(
                When(~Exists(unreadable), then=F("text")),
                default=Subquery(readable_passages.order_by("ordinal").values("text")[:1]),
            ),
            channel_words=Case(
                *[When(kind=kind, then=Value(words)) for kind, words in CHANNEL_WORDS.items()],
                default=F("kind"),
            ),
        )
        .order_by("-created_at", "-pk")
    )
    if filters.kind:
        listed = listed.filter(kind=filters.kind)
    if filters.person:
        listed = listed.filter(
            Exists(
                Observation.objects.filter(
                    source=OuterRef("pk"), said_by_name__iexact=filters.person
                )
            )
        )
    if filters.q:  # in the title, or in a passage they may read: never in masked text
        words = Passage.objects.readable_by(reader).filter(
            source=OuterRef("pk"), text__icontains=filters.q
        )
        listed = listed.filter(Q(title__icontains=filters.q) | Exists(words))
    return listed


def people_heard(memory: Memory, reader) -> list[str]:
    """Everyone heard in a source of ``memory`` that ``reader`` may see, for the filter."""
    return list(
        Observation.objects.readable_by(reader)
        .filter(fact__memory=memory, source__isnull=False)
        .exclude(said_by_name="")
        .order_by("said_by_name")
        .values_list("said_by_name", flat=True)
        .distinct()
    )
