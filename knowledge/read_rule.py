"""The read rule as SQL: the one predicate ``Fact.objects.readable_by`` (and the passages')
adds to a query. Kept apart from ``knowledge.visibility``, which explains the rules and holds
what reads the models, so that ``knowledge.models`` can use it without importing a module that
imports it back."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Expression, F, Q
from django.db.models.expressions import RawSQL

# The label ids a person's roles grant (their own roles and every ``everyone`` role), the
# label sets those make readable, every other set (and 0), and the memories they administer:
# database functions (migration 0012), each called once per statement as a subquery, so the
# planner sees one call where it would otherwise plan their joins in every part of a statement
# that applies the rule (context() applies it five times in one statement).
_GRANTED_TO = "knowledge_role_labels_of(%s)"
_READABLE = "(SELECT knowledge_sets_of_labels({}))"
_UNREADABLE = "(SELECT knowledge_other_sets_of_labels({}))"
_ADMINISTERED = "(SELECT knowledge_administered_by(%s))"


@dataclass(frozen=True)
class Reader:
    """A reader given by labels rather than by a person: a role (Read as), or the household —
    what every member of a memory reads (the memory document). Administers nothing."""

    name: str
    label_ids: frozenset[int]


def reads_everything(user) -> bool:
    """The system and superusers; a memory's administrators read all of that memory only."""
    return user is None or (not isinstance(user, Reader) and user.is_active and user.is_superuser)


def reads_nothing(user) -> bool:
    return not isinstance(user, Reader) and (not user.is_authenticated or not user.is_active)


class _CitesOnlyReadable(Expression):
    """Every label set the row carries (``label_sets``) is readable: ``label_sets <@ R``, or
    equally ``NOT label_sets && U`` with U every other set and 0. Both arrays are subqueries the
    database works out once per statement; each row is compared with the shorter (a reader who
    reads most things has few sets they may not read). See knowledge/visibility.py."""

    output_field = models.BooleanField()

    def __init__(self, column, readable, unreadable):
        super().__init__()
        self.column, self.readable, self.unreadable = column, readable, unreadable

    def get_source_expressions(self):
        return [self.column, self.readable, self.unreadable]

    def set_source_expressions(self, exprs):
        self.column, self.readable, self.unreadable = exprs

    def as_sql(self, compiler, connection):
        column, column_params = compiler.compile(self.column)
        readable, readable_params = compiler.compile(self.readable)
        unreadable, unreadable_params = compiler.compile(self.unreadable)
        sql = (
            f"(CASE WHEN cardinality({readable}) <= cardinality({unreadable}) "
            f"THEN {column} <@ {readable} ELSE NOT ({column} && {unreadable}) END)"
        )
        params = (
            *readable_params,
            *unreadable_params,
            *column_params,
            *readable_params,
            *column_params,
            *unreadable_params,
        )
        return sql, params


def _array(sql: str, params: list) -> RawSQL:
    return RawSQL(sql, params, output_field=ArrayField(models.BigIntegerField()))


def _granted(user) -> tuple[str, list]:
    """SQL for the label ids ``user`` is granted, and its parameters."""
    if isinstance(user, Reader):
        return "%s::bigint[]", [sorted(user.label_ids)]
    return _GRANTED_TO, [user.pk]


def _readable_sets(user) -> RawSQL:
    granted, params = _granted(user)
    return _array(_READABLE.format(granted), params)


def _unreadable_sets(user) -> RawSQL:
    granted, params = _granted(user)
    return _array(_UNREADABLE.format(granted), params)


def _administered(user) -> Q:
    if isinstance(user, Reader):
        return Q(pk__in=[])
    return Q(_Any(F("memory_id"), _array(_ADMINISTERED, [user.pk])))


class _Any(Expression):
    """``column = ANY(array)``."""

    output_field = models.BooleanField()

    def __init__(self, column, array):
        super().__init__()
        self.column, self.array = column, array

    def get_source_expressions(self):
        return [self.column, self.array]

    def set_source_expressions(self, exprs):
        self.column, self.array = exprs

    def as_sql(self, compiler, connection):
        column, column_params = compiler.compile(self.column)
        array, array_params = compiler.compile(self.array)
        return f"({column} = ANY({array}::bigint[]))", (*column_params, *array_params)


def readable_facts(facts: models.QuerySet, user) -> models.QuerySet:
    """``facts`` narrowed to those ``user`` (a person, None, or a ``Reader``) may read."""
    if reads_everything(user):
        return facts
    if reads_nothing(user):
        return facts.none()
    only_readable = _CitesOnlyReadable(
        F("label_sets"), _readable_sets(user), _unreadable_sets(user)
    )
    return facts.filter(_administered(user) | (Q(only_readable) & ~Q(label_sets=[])))


def readable_passages(passages: models.QuerySet, user) -> models.QuerySet:
    """``passages`` narrowed to those ``user`` may read (one of their roles grants one of its
    labels)."""
    if reads_everything(user):
        return passages
    if reads_nothing(user):
        return passages.none()
    return passages.filter(_administered(user) | Q(_Any(F("label_set_id"), _readable_sets(user))))
