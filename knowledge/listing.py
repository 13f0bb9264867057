"""The facts list: search, filters and sorts, shared by the Knowledge tab and the REST API.

Every filter is validated here once; a bad value raises BadFilter naming the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce, Lower

from brain import inputs
from knowledge.models import Fact, Memory, Subject
from knowledge.subjects import UnknownSubject, resolve

SORTS = {
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
    "certain": ("-confidence", "-pk"),
    "subject": ("subject_name", "-pk"),
}
STATUSES = ("live", "all", *Fact.Status.values, "superseded")
MAX_SEARCH_CHARS = 200


class BadFilter(ValueError):
    """A filter value that cannot be used; the message names it and what would work."""


@dataclass(frozen=True)
class FactFilters:
    q: str = ""
    subject: str = ""  # a subject id, entity id, name or nickname
    subject_kind: str = ""  # house | room | device | person: the chips
    kind: str = ""
    channel: str = ""
    taught_by: str = ""
    status: str = "live"
    sort: str = "newest"
    as_of: str = ""

    @classmethod
    def from_params(cls, params) -> FactFilters:
        names = cls.__dataclass_fields__
        return cls(**{name: (params.get(name) or "").strip() for name in names if params.get(name)})


def _choice(value: str, allowed, label: str) -> None:
    if value and value not in allowed:
        raise BadFilter(f"{label} must be one of {', '.join(allowed)}; got {value!r}.")


def facts_for(memory: Memory, reader, filters: FactFilters):
    """The facts ``reader`` may read in ``memory``, narrowed and sorted as ``filters`` say."""
    _choice(filters.sort, SORTS, "sort")
    _choice(filters.status, STATUSES, "status")
    _choice(filters.kind, Fact.Kind.values, "kind")
    _choice(filters.channel, Fact.Channel.values, "channel")
    _choice(filters.subject_kind, Subject.Kind.values, "subject_kind")
    if len(filters.q) > MAX_SEARCH_CHARS:
        raise BadFilter(f"Search for at most {MAX_SEARCH_CHARS} characters.")
    facts = Fact.objects.for_memory(memory).readable_by(reader).without_vectors()
    if filters.as_of:
        when = inputs.moment(filters.as_of)
        if when is None:
            raise BadFilter(
                f"as_of must be a date and time like 2026-11-01T09:00Z; got {filters.as_of!r}."
            )
        facts = facts.as_of(when)
    elif filters.status == "live":
        facts = facts.live()
    elif filters.status == "superseded":  # replaced by another fact (retired ones were not)
        facts = facts.filter(valid_to__isnull=False).exclude(status=Fact.Status.RETIRED)
    elif filters.status != "all":
        facts = facts.filter(status=filters.status)
    if filters.q:
        facts = facts.matching(filters.q)
    if filters.subject:
        try:
            subjects = resolve(memory, [filters.subject])
        except UnknownSubject as unknown:
            raise BadFilter(str(unknown)) from None
        facts = facts.filter(subjects__in=subjects)
    if filters.subject_kind:
        about = Fact.subjects.through.objects.filter(subject__kind=filters.subject_kind)
        facts = facts.filter(pk__in=about.values("fact"))
    if filters.kind:
        facts = facts.filter(kind=filters.kind)
    if filters.channel:
        facts = facts.filter(channel=filters.channel)
    if filters.taught_by:
        facts = facts.filter(taught_by_name__iexact=filters.taught_by)
    if filters.sort == "subject":
        first_subject = Subject.objects.filter(facts=OuterRef("pk")).order_by(Lower("name"))
        facts = facts.annotate(
            subject_name=Coalesce(Subquery(first_subject.values("name")[:1]), Value("~"))
        )
    return (
        facts.select_related("source", "taught_by")
        .prefetch_related("subjects")
        .order_by(*SORTS[filters.sort or "newest"])
    )
