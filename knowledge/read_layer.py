"""The read layer: rows that may only be read for someone.

Every model whose rows belong to a memory and carry labels, or inherit them from what they are
about (facts, passages, sources, pages, conflicts, review items, items waiting to be filed,
timeline events, observations, study sessions), is read through a ``ReadQuerySet``. A query of
one says whose reading it is before it runs:

- ``.readable_by(reader)``: a person, a ``Reader`` (a role being read as, the household), or
  ``SYSTEM``; narrowed by the one read rule (``knowledge.read_rule``) for the first two.
- ``.as_system(why)``: every row, for code that works for the memory itself and shows no one
  what it read — the gate comparing a statement with what is known, the consolidator filing the
  household document (which then holds only what the household reads), a task given an id.
  ``why`` says what for; ``git grep "as_system("`` lists every place that reads without a
  person, each with its reason, and ``knowledge/tests/test_read_layer.py`` holds every call to
  having one, and every model that points at a labelled row to having this base (or a reason
  written there why it needs none).

A query that names neither fails when it runs (``ReaderMissing``), in every environment: it
never silently returns every row, and it never silently returns none (code that works for the
memory would then act on an empty memory — a filing pass dropping what it cannot see). Related
managers (``source.passages.all()``) and ``prefetch_related`` without a ``Prefetch`` queryset are
queries like any other and fail the same way; a result already fetched (a prefetch that named
its reader) is not read again. Writes (``update``, ``delete``, ``create``) need no reader.

``None`` is not a reader: ``readable_by(None)`` fails too. The actor ``None`` of
``knowledge.access`` (the worker, a terminal without ``--as``) reads as ``SYSTEM``, which a
surface names where it stands (``reader_for``).
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any, Self, TypeVar, cast

from django.db import models


class ReaderMissing(RuntimeError):
    """A query of rows that carry labels ran without saying for whom it reads."""


class _System:
    """The memory itself: reads every row. Named wherever it is used (``SYSTEM``,
    ``as_system(why)``) so that reading without a person is never the default."""

    name = "the system"

    def __repr__(self) -> str:
        return "SYSTEM"


_M = TypeVar("_M", bound=models.Model)

SYSTEM: Any = _System()
_UNSET = object()


def is_system(reader) -> bool:
    return reader is SYSTEM


def reader_for(actor) -> Any:
    """The reader for an actor of ``knowledge.access``: the person (or ``Reader``) themselves,
    or ``SYSTEM`` for ``None`` — the worker, beat, a terminal without ``--as`` and an MCP server
    without ``--user``, which administer every memory and so read all of it."""
    return SYSTEM if actor is None else actor


def _asked_by_a_test() -> bool:
    """Whether the line that runs the query is a test's own (a test reads what it arranged, as
    the system): the nearest frame outside Django and this module is in a ``tests`` folder or
    a ``conftest.py``. Application code a test calls is held to the rule like any other."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.endswith("read_layer.py") or f"{os.sep}django{os.sep}" in name):
            return f"{os.sep}tests{os.sep}" in name or name.endswith("conftest.py")
        frame = frame.f_back
    return False


# Relations whose rows are read with the row they start from: the pages a fact is about (a page
# exists for whoever reads one of its facts), the passages it cites (a fact is read only by
# those who read every passage it cites) and the passages a review item asks about (an item is
# read only by those who read every passage it names). Keyed by (the row's model, the related
# model) names.
READ_WITH_THEIR_ROW = {("Fact", "Subject"), ("Fact", "Passage"), ("ReviewItem", "Passage")}


class ReadManager(models.Manager[_M]):
    """The manager of a ``ReadQuerySet``; also the base of the related managers Django makes
    from it (``fact.subjects``), which is where READ_WITH_THEIR_ROW applies."""

    def get_queryset(self) -> ReadQuerySet[_M]:
        # Made by from_queryset with a ReadQuerySet (as_manager below): its queryset is one.
        rows = cast("ReadQuerySet[_M]", super().get_queryset())
        instance = getattr(self, "instance", None)
        if instance is not None and (type(instance).__name__, self.model.__name__) in (
            READ_WITH_THEIR_ROW
        ):
            rows = rows.as_system(f"read with its {type(instance).__name__.lower()}")
        return rows


class ReadQuerySet(models.QuerySet[_M]):
    """A queryset that must be told for whom it reads (the module docstring). Subclasses
    implement ``_narrow(reader)``: the rows ``reader`` (a person or a ``Reader``, never
    ``SYSTEM``) may read."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._reader: Any = _UNSET
        self._why = ""

    @classmethod
    def as_manager(cls) -> ReadManager[Any]:
        manager = ReadManager.from_queryset(cls)()
        # Django's own flag (QuerySet.as_manager sets it), private and not in django-stubs.
        manager._built_with_as_manager = True  # type: ignore[attr-defined]
        return manager

    as_manager.queryset_only = True  # type: ignore[attr-defined]

    # Naming the reader ---------------------------------------------------------------------

    def readable_by(self, reader) -> Self:
        """The rows ``reader`` may read: a person, a ``Reader``, or ``SYSTEM`` (every row)."""
        if reader is None:
            raise ReaderMissing(
                f"{self.model.__name__}.objects.readable_by(None): pass the person, or name "
                "the system with as_system(why)."
            )
        narrowed = self if is_system(reader) else self._narrow(reader)
        return narrowed._read_for(reader)

    def as_system(self, why: str) -> Self:
        """Every row, read for the memory itself; ``why`` says what for (the module
        docstring)."""
        if not why or not why.strip():
            raise ValueError("as_system needs the reason it reads without a person")
        clone = self._read_for(SYSTEM)
        clone._why = why
        return clone

    def _narrow(self, reader) -> Self:
        raise NotImplementedError(f"{type(self).__name__} does not say what a reader may read")

    def _read_for(self, reader) -> Self:
        # QuerySet._chain is private API, not in django-stubs.
        clone = self._chain()  # type: ignore[attr-defined]
        clone._reader = reader
        return clone

    @property
    def reader(self):
        """Whom this query reads for (``SYSTEM`` for ``as_system``), or None when unnamed."""
        return None if self._reader is _UNSET else self._reader

    def __repr__(self) -> str:
        if self._reader is _UNSET and self._result_cache is None:
            return f"<{type(self).__name__} of {self.model.__name__} rows, no reader named>"
        return super().__repr__()

    # Carrying the reader through every clone, checking it where rows are read ----------------

    def _clone(self):
        # QuerySet._clone is private API, not in django-stubs.
        clone = super()._clone()  # type: ignore[misc]
        clone._reader, clone._why = self._reader, self._why
        return clone

    def _check(self) -> None:
        if self._reader is _UNSET and not self.query.is_empty() and not _asked_by_a_test():
            raise ReaderMissing(
                f"A query of {self.model.__name__} rows ran without a reader: add "
                ".readable_by(reader) for a person, or .as_system(why) for the memory itself "
                "(knowledge/read_layer.py)."
            )

    def _fetch_all(self):
        if self._result_cache is None:
            self._check()
        super()._fetch_all()

    def iterator(self, chunk_size=None):
        self._check()
        return super().iterator(chunk_size=chunk_size)

    def count(self):
        if self._result_cache is None:
            self._check()
        return super().count()

    def exists(self):
        if self._result_cache is None:
            self._check()
        return super().exists()

    def contains(self, obj):
        if self._result_cache is None:
            self._check()
        return super().contains(obj)

    def aggregate(self, *args, **kwargs):
        self._check()
        return super().aggregate(*args, **kwargs)

    def explain(self, *, format=None, **options):
        self._check()
        return super().explain(format=format, **options)

    def delete(self):
        """A delete reads the rows it removes (and what cascades from them) only to remove
        them: no reader."""
        return super(ReadQuerySet, self._read_for(SYSTEM)).delete()

    delete.alters_data = True  # type: ignore[attr-defined]
    delete.queryset_only = True  # type: ignore[attr-defined]
