"""The read rule as SQL: the one predicate ``Fact.objects.readable_by`` (and the passages')
adds to a query. Kept apart from ``knowledge.visibility``, which explains the rules and holds
what reads the models, so that ``knowledge.models`` can use it without importing a module that
imports it back.

A person's ``Scope`` is read in one query (database functions of migration 0012), once per
request (``request_scope``, which ``knowledge.visibility.ReadingMiddleware`` opens) or once per
call outside one: the label sets their roles make
readable, every other set (and 0, a passage with no label), the newest set id when it was read,
and the memories they administer. The predicate then compares each row with plain arrays —
nothing for the planner to plan in each of the five places context() applies it. A row is
compared with the shorter array: ``label_sets <@ readable``, or ``NOT label_sets && unreadable``
when that is shorter (a reader who reads most things has few sets they may not read) — together
with ``label_sets[last] <= newest``: the sets are interned and never change, so a set made after
the scope was read (a relabel a moment ago) is one the scope cannot vouch for, and the row is
read by administrators only until the next request. The rule fails closed, never open.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import connection, models
from django.db.models import Expression, F, Q

_SCOPE_OF_PERSON = """
    SELECT knowledge_sets_of_labels(granted), knowledge_other_sets_of_labels(granted),
           (SELECT coalesce(max(id), 0) FROM knowledge_labelset),
           knowledge_administered_by(%s)
    FROM knowledge_role_labels_of(%s) AS granted
"""
_SCOPE_OF_LABELS = """
    SELECT knowledge_sets_of_labels(%s::bigint[]), knowledge_other_sets_of_labels(%s::bigint[]),
           (SELECT coalesce(max(id), 0) FROM knowledge_labelset), '{}'::bigint[]
"""


@dataclass(frozen=True)
class Reader:
    """A reader given by labels rather than by a person: a role (Read as), or the household —
    what every member of a memory reads (the memory document). Administers nothing."""

    name: str
    label_ids: frozenset[int]


@dataclass(frozen=True)
class Scope:
    """What one reader reads, as ids: see the module docstring."""

    readable: list[int]
    unreadable: list[int]
    newest: int
    administered: list[int]


def reads_everything(user) -> bool:
    """The system and superusers; a memory's administrators read all of that memory only."""
    return user is None or (not isinstance(user, Reader) and user.is_active and user.is_superuser)


def reads_nothing(user) -> bool:
    return not isinstance(user, Reader) and (not user.is_authenticated or not user.is_active)


_request_scopes: ContextVar[dict | None] = ContextVar("request_scopes", default=None)
# Read as: (the person asking, whom they read as) for the request being served
# (knowledge.visibility.ReadingMiddleware sets it, for an administrator who chose it).
_reading_as: ContextVar[tuple[int, object] | None] = ContextVar("reading_as", default=None)


def as_read(user):
    """The reader whose rules apply to ``user``'s request: whom an administrator reads as, or
    ``user`` themselves."""
    chosen = _reading_as.get()
    if chosen is not None and user is not None and not isinstance(user, Reader):
        asking, reader = chosen
        if user.pk == asking:
            return reader
    return user


@contextmanager
def request_scope(reading_as: tuple[int, object] | None = None) -> Iterator[None]:
    """Scopes are read once inside this block (a request); ``reading_as``: Read as."""
    scopes, chosen = _request_scopes.set({}), _reading_as.set(reading_as)
    try:
        yield
    finally:
        _reading_as.reset(chosen)
        _request_scopes.reset(scopes)


def scope_of(user) -> Scope:
    """``user``'s scope (a person or a ``Reader``): read now, or kept for this request."""
    key = ("labels", user.label_ids) if isinstance(user, Reader) else ("person", user.pk)
    kept = _request_scopes.get()
    if kept is not None and key in kept:
        return kept[key]
    if isinstance(user, Reader):
        labels = sorted(user.label_ids)
        sql, params = _SCOPE_OF_LABELS, [labels, labels]
    else:
        sql, params = _SCOPE_OF_PERSON, [user.pk, user.pk]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        readable, unreadable, newest, administered = cursor.fetchone()
    scope = Scope(readable, unreadable, newest, administered)
    if kept is not None:
        kept[key] = scope
    return scope


class _Last(Expression):
    """The last element of an array column (``label_sets`` is kept in order: its largest)."""

    output_field = models.BigIntegerField()

    def __init__(self, column):
        super().__init__()
        self.column = column

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def as_sql(self, compiler, connection):
        column, params = compiler.compile(self.column)
        return f"{column}[cardinality({column})]", (*params, *params)


class _Compared(Expression):
    """``column <op> (%s::bigint[])``, the array one parameter (the ORM's array lookups write
    one placeholder, and build one expression, per id: a millisecond for 75 ids)."""

    output_field = models.BooleanField()

    def __init__(self, column, op: str, ids: list[int]):
        super().__init__()
        self.column, self.op, self.ids = column, op, ids

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def as_sql(self, compiler, connection):
        column, params = compiler.compile(self.column)
        return f"({column} {self.op} (%s::bigint[]))", (*params, self.ids)


def _cites_only_readable(scope: Scope) -> Q:
    cites = ~Q(label_sets=[])
    if len(scope.readable) <= len(scope.unreadable):
        return cites & Q(_Compared(F("label_sets"), "<@", scope.readable))
    return (
        cites
        & ~Q(_Compared(F("label_sets"), "&&", scope.unreadable))
        & Q(models.lookups.LessThanOrEqual(_Last(F("label_sets")), scope.newest))
    )


def readable_facts(facts: models.QuerySet, user) -> models.QuerySet:
    """``facts`` narrowed to those ``user`` (a person, None, or a ``Reader``) may read."""
    user = as_read(user)
    if reads_everything(user):
        return facts
    if reads_nothing(user):
        return facts.none()
    scope = scope_of(user)
    rule = _cites_only_readable(scope)
    if scope.administered:
        rule = Q(memory_id__in=scope.administered) | rule
    return facts.filter(rule)


def readable_passages(passages: models.QuerySet, user) -> models.QuerySet:
    """``passages`` narrowed to those ``user`` may read (one of their roles grants one of its
    labels)."""
    user = as_read(user)
    if reads_everything(user):
        return passages
    if reads_nothing(user):
        return passages.none()
    scope = scope_of(user)
    rule = Q(_Compared(F("label_set_id"), "= ANY", scope.readable))
    if scope.administered:
        rule = Q(memory_id__in=scope.administered) | rule
    return passages.filter(rule)
