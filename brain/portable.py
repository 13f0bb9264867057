"""The app-independent part of export and import: the error, the options, the ``Section`` every
app declares its part of the file with, and the uid rules sections share.

A section is an object with ``key``, ``dump(memory)``, ``check(data)`` and
``load(memory, data, options)``; ``surfaces.portable`` lists them in load order and
``memory.portable`` runs them. ``check`` sees only its own part of the file and raises
:class:`ImportRejected` naming the first bad entry; ``load`` runs inside the import's one
transaction, so anything it raises leaves nothing written. Nothing here knows any app's models.

Rules of a declared section (:class:`Section`, a list of entries, one per row):

- Its columns are the model's own fields, named once (``col("text")``, or
  ``col("taught_by_name", key="taught_by")`` where the file says it differently). Dumping,
  checking and building a row all read that one list, and every check comes from the field
  itself: its type, ``max_length``, ``choices``, ``null``, ``blank`` and ``validators``
  (including the database's integer range). A new column is one edit: add it to the list.
- A column is required when the model has no default for it and refuses null and blank, or when
  the section says so; a column the file leaves out takes the model's default, so files written
  before a column existed still import. A reference to another model's field (``ref``) is
  checked the same way, and the app dumps and resolves it.
- What spans rows stays with the app: uids and how rows find each other (``links``,
  ``check_entry``, ``check_all`` and ``load``).

An export is made for a reader (``exporting_for``): a person who may not read everything in
the memory gets only what they read. A section whose rows hold what some readers may not read
narrows them by ``export_reader()`` through its app's read rule (``readable_by``); None, the
default, is the system, which reads everything.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from itertools import batched
from typing import Any, ClassVar

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

LOOKUP_BATCH = 10_000  # uids per ``uid IN (...)`` query


class ImportRejected(Exception):
    """The file cannot be imported; the message names the problem. Nothing was written."""


@dataclass
class ImportOptions:
    """What the person asked for, the report (lines the sections write for that person), and
    what the sections loaded so far tell the ones after them.

    ``here[key]``: for each entry of section ``key`` (by the uid the file gives it), the row it
    is in this memory, new or already here; ``added[key]``: the file's uids this import added.
    """

    replace_memory: bool = False
    by: object = None
    report: list[str] = field(default_factory=list)
    here: dict[str, dict[uuid.UUID, int]] = field(default_factory=dict)
    added: dict[str, set[uuid.UUID]] = field(default_factory=dict)


# Checking -------------------------------------------------------------------------------------


def require(condition: bool, message: str) -> None:
    """Raise ImportRejected(``message``) unless ``condition`` holds."""
    if not condition:
        raise ImportRejected(message)


def has_nul(value: Any) -> bool:
    """Whether any text in a parsed JSON value (keys included) holds a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def is_datetime(value: Any) -> bool:
    """Whether ``value`` is an ISO 8601 date and time (a zone offset is optional)."""
    try:
        return isinstance(value, str) and parse_datetime(value) is not None
    except ValueError:  # well formed but impossible, like month 13
        return False


def is_name(value: Any, limit: int) -> bool:
    """Whether ``value`` is text of at most ``limit`` characters (empty allowed)."""
    return isinstance(value, str) and len(value) <= limit


def when(value: str | None) -> datetime | None:
    """A checked date and time as an aware datetime; without an offset it is read in the
    current time zone. None stays None."""
    if value is None:
        return None
    moment = parse_datetime(value)
    if moment is None:
        raise ValueError(f"{value!r} is not a date and time; check it with is_datetime first")
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def check_chains(
    key: str,
    links: dict[uuid.UUID, uuid.UUID],
    numbers: dict[uuid.UUID, int],
    *,
    missing: str = "{where} points at {target!r}, which no entry of the file is.",
    circle: str = "{where} comes back to itself through the entries it points at.",
) -> None:
    """Each link (an entry's uid → the uid it points at, like a fact's successor) names an entry
    of the file, and following links never comes back to where it started. ``missing`` and
    ``circle`` are the messages, with ``{where}`` and ``{target}`` filled in."""
    for uid, target in links.items():
        require(
            target in numbers,
            missing.format(where=f"{key} entry {numbers[uid]}", target=str(target)),
        )
    done: set[uuid.UUID] = set()
    for start in links:
        path: list[uuid.UUID] = []
        at: uuid.UUID | None = start
        while at is not None and at not in done:
            require(at not in path, circle.format(where=f"{key} entry {numbers[start]}"))
            path.append(at)
            at = links.get(at)
        done.update(path)


# Columns: a model's field as a key of the file ------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One key of a section's entries, checked by the model field it names.

    ``own``: a field of the section's model, which the section dumps and loads itself; else a
    reference to another model's field, checked here and dumped and resolved by the app.
    """

    key: str
    field: models.Field
    required: bool = False
    validators: tuple[Callable[[Any], None], ...] = ()
    own: bool = True
    null: bool | None = None  # None: as the field says
    blank: bool | None = None

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def allows_null(self) -> bool:
        return self.field.null if self.null is None else self.null

    @property
    def allows_blank(self) -> bool:
        return self.field.blank if self.blank is None else self.blank

    def check(self, where: str, entry: dict) -> None:
        if self.key not in entry:
            require(not self.required, f'{where} has no "{self.key}" ({self.expected}).')
            return
        value = entry[self.key]
        if value is None:
            require(self.allows_null, f'{where} has an invalid "{self.key}" ({self.expected}).')
            return
        if value == "" and self.allows_blank:
            return
        flat = self.field.flatchoices if self.field.choices else None
        if flat:
            allowed = [str(choice) for choice, _ in flat]
            require(
                value in [choice for choice, _ in flat] and not isinstance(value, bool),
                f"{where} has an unknown {self.key} {value!r}: use one of {', '.join(allowed)}.",
            )
            return
        require(
            _valid(self.field, value, self.validators),
            f'{where} has an invalid "{self.key}" ({self.expected}).',
        )
        require(
            self.allows_blank or not isinstance(value, str) or value.strip() != "",
            f'{where} has an empty "{self.key}".',
        )

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` passes this column's checks."""
        try:
            self.check("", {self.key: value})
        except ImportRejected:
            return False
        return True

    @property
    def expected(self) -> str:
        described = _expected(self.field, self.validators, blank=self.allows_blank)
        return f"{described}, or null" if self.allows_null else described

    def dumped(self, row: models.Model) -> Any:
        return to_json(getattr(row, self.name))

    def loaded(self, entry: dict) -> Any:
        """The entry's value as the field holds it; the model's default when it has none."""
        if self.key not in entry:
            return self.field.get_default()
        value = entry[self.key]
        if value is not None and isinstance(self.field, models.DateTimeField):
            return when(value)
        if value is not None and isinstance(self.field, models.UUIDField):
            return uuid.UUID(value)
        return value


@dataclass(frozen=True)
class Declared:
    """A column named by its field, resolved against the section's model (see ``col``)."""

    name: str
    key: str | None = None
    required: bool | None = None
    validators: tuple[Callable[[Any], None], ...] = ()
    null: bool | None = None

    def resolve(self, model: type[models.Model]) -> Column:
        found = model._meta.get_field(self.name)
        if not isinstance(found, models.Field):
            raise TypeError(
                f"{model.__name__}.{self.name} is a relation seen from the other side, not a column"
            )
        return Column(
            key=self.key or self.name,
            field=found,
            required=_required(found) if self.required is None else self.required,
            validators=self.validators,
            null=self.null,
        )


def col(
    name: str,
    *,
    key: str | None = None,
    required: bool | None = None,
    validators: tuple[Callable[[Any], None], ...] = (),
    null: bool | None = None,
) -> Declared:
    """A column of the section's model: the field ``name``, called ``key`` in the file.
    ``required`` None: required when the model has no default and refuses null and blank.
    ``null``: whether the file may say null where the field itself says otherwise (the app
    then fills the value in)."""
    return Declared(name, key, required, validators, null)


def ref(
    key: str,
    field: models.Field | Any,
    *,
    required: bool = False,
    null: bool | None = None,
    blank: bool | None = None,
    validators: tuple[Callable[[Any], None], ...] = (),
) -> Column:
    """A key that names a row of another model by one of its fields (a subject's entity id, a
    room's name, a uid): checked as that field, dumped and resolved by the app. ``field`` is a
    field or a model's field descriptor (``Subject.entity_id``); ``null`` and ``blank`` say
    whether the reference may be left empty, when the field itself says otherwise."""
    found = getattr(field, "field", field)
    return Column(key, found, required, validators, own=False, null=null, blank=blank)


# A reference by uid, to a row the file carries (a fact's successor, an observation's episode).
UID = models.UUIDField()


def between(low: float, high: float) -> tuple[MinValueValidator, MaxValueValidator]:
    """Validators for a number from ``low`` to ``high``, for columns the model leaves open."""
    return MinValueValidator(low), MaxValueValidator(high)


def _required(found: models.Field) -> bool:
    return not found.has_default() and not found.null and not found.blank


def _valid(found: models.Field, value: Any, extra: tuple) -> bool:
    if isinstance(found, ArrayField):
        return isinstance(value, list) and all(_valid(found.base_field, v, ()) for v in value)
    if isinstance(found, models.BooleanField):
        return isinstance(value, bool)
    if isinstance(found, models.DateTimeField):
        return is_datetime(value)
    if isinstance(found, models.UUIDField):
        return is_uuid(value)
    if isinstance(found, models.JSONField):
        return True
    if isinstance(found, models.IntegerField):
        if not isinstance(value, int) or isinstance(value, bool):
            return False
    elif isinstance(found, models.FloatField):
        if not _is_number(value):
            return False
    elif isinstance(found, models.CharField | models.TextField):
        if not isinstance(value, str):
            return False
        if found.max_length is not None and len(value) > found.max_length:
            return False
    try:
        for validator in [*found.validators, *extra]:
            validator(value)
    except ValidationError:
        return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _expected(found: models.Field, extra: tuple = (), *, blank: bool | None = None) -> str:
    """What a valid value looks like, in words, for the messages."""
    blank = found.blank if blank is None else blank
    if found.choices:
        described = f"one of {', '.join(str(choice) for choice, _ in found.flatchoices)}"
    elif isinstance(found, ArrayField):
        described = f"a list, each {_expected(found.base_field)}"
    elif isinstance(found, models.BooleanField):
        described = "true or false"
    elif isinstance(found, models.DateTimeField):
        described = "a date and time"
    elif isinstance(found, models.UUIDField):
        described = "a uid"
    elif isinstance(found, models.IntegerField | models.FloatField):
        what = "a whole number" if isinstance(found, models.IntegerField) else "a number"
        validators = [*found.validators, *extra]
        lows = [v.limit_value for v in validators if isinstance(v, MinValueValidator)]
        highs = [v.limit_value for v in validators if isinstance(v, MaxValueValidator)]
        low, high = (max(lows) if lows else None), (min(highs) if highs else None)
        if low is not None and high is not None:
            described = f"{what} from {low:,} to {high:,}"
        elif low is not None:
            described = f"{what}, {low:,} or more"
        else:
            described = what
    elif isinstance(found, models.CharField | models.TextField):
        limits = [found.max_length] if found.max_length else []
        limits += [v.limit_value for v in extra if isinstance(v, MaxLengthValidator)]
        least = "" if blank else "not empty, "
        described = (
            f"text, {least}at most {min(limits):,} characters"
            if limits
            else f"text{'' if blank else ', not empty'}"
        )
    else:
        described = "a JSON value"
    return described


def to_json(value: Any) -> Any:
    """A field's value as the file holds it: dates and times in ISO 8601, uids as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


# Who an export is for ---------------------------------------------------------------------------

_EXPORT_READER: ContextVar[Any] = ContextVar("export_reader", default=None)
_EXPORT_MEMO: ContextVar[dict | None] = ContextVar("export_memo", default=None)


@contextmanager
def exporting_for(reader: Any) -> Iterator[None]:
    """Sections dumped inside this block hold only what ``reader`` may read (a person, a
    ``Reader``, or the read layer's ``SYSTEM``: never None)."""
    if reader is None:
        raise ValueError("An export is made for a reader: name the person, or the system.")
    token, memo = _EXPORT_READER.set(reader), _EXPORT_MEMO.set({})
    try:
        yield
    finally:
        _EXPORT_MEMO.reset(memo)
        _EXPORT_READER.reset(token)


def export_reader() -> Any:
    """The reader the export being made is for."""
    reader = _EXPORT_READER.get()
    if reader is None:
        raise RuntimeError("export_reader() outside exporting_for(reader)")
    return reader


def export_memo() -> dict:
    """What the export being made worked out once (a source as its reader may see it), kept
    for the rest of it."""
    memo = _EXPORT_MEMO.get()
    return memo if memo is not None else {}


# Sections -------------------------------------------------------------------------------------


class Section[Row: models.Model, Owner: models.Model]:
    """A list of entries, one per row of ``model``: declare ``key``, ``model``, ``columns``
    (``col`` for the model's fields, ``ref`` for references the app resolves) and ``uid``
    (entries carry the row's uid), then write ``rows`` and ``load``; ``links``,
    ``check_entry`` and ``check_all`` add what spans rows. ``Row`` is ``model``, ``Owner`` the
    model of the memory its rows are exported from and imported into (``Section[Fact, Memory]``).
    """

    key: ClassVar[str]
    model: ClassVar[type[models.Model]]
    columns: tuple[Declared | Column, ...] = ()
    uid: ClassVar[bool] = True

    def __init__(self) -> None:
        self.fields = [
            c.resolve(self.model) if isinstance(c, Declared) else c for c in self.columns
        ]
        self.own = [c for c in self.fields if c.own]

    # Export

    def rows(self, memory: Owner) -> Iterable[Row]:
        """The memory's rows this section exports. Every section says which (abstract)."""
        raise NotImplementedError(f"{type(self).__name__} must say which rows it exports")

    def dump(self, memory: Owner) -> list[dict]:
        return [self.entry(row) for row in self.rows(memory)]

    def entry(self, row: Row) -> dict:
        entry = {"uid": str(row.serializable_value("uid"))} if self.uid else {}
        entry.update((column.key, column.dumped(row)) for column in self.own)
        entry.update(self.links(row))
        return entry

    def links(self, row: Row) -> dict:
        """The entry's references to other rows, as the file names them."""
        return {}

    # Checking

    def check(self, data: Any) -> None:
        require(isinstance(data, list), f'"{self.key}" must be a list.')
        seen: set[uuid.UUID] = set()
        for number, entry in enumerate(data, start=1):
            where = f"{self.key} entry {number}"
            require(isinstance(entry, dict), f"{where} is not an object.")
            if self.uid:
                require(is_uuid(entry.get("uid")), f"{where} has an invalid uid.")
                uid = uuid.UUID(entry["uid"])
                require(uid not in seen, f"{where} repeats the uid of an earlier entry.")
                seen.add(uid)
            for column in self.fields:
                column.check(where, entry)
            self.check_entry(where, entry)
        self.check_all(data)

    def check_entry(self, where: str, entry: dict) -> None:
        """Rules for one entry beyond its fields' own."""

    def check_all(self, data: list[dict]) -> None:
        """Rules across entries: references between them, repeats."""

    # Import

    def values(self, entry: dict) -> dict[str, Any]:
        """The entry's own columns as keyword arguments for the model."""
        return {column.name: column.loaded(entry) for column in self.own}

    def load(self, memory: Owner, data: list[dict], options: ImportOptions) -> None:
        """Write the checked entries into ``memory``. Every section says how (abstract): what
        matches a row already here differs by section."""
        raise NotImplementedError(f"{type(self).__name__} must say how it imports")

    def summary(self, options: ImportOptions, name: str, added: int, total: int) -> None:
        options.report.append(f"{name}: {added} added, {total - added} already here.")


# Uids: importing the same file twice, or into a second memory -------------------------------


def placements(
    model: type[models.Model], memory: models.Model, uids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, bool]]:
    """For each uid of a file: the uid its row has (or gets) in ``memory``, and whether that row
    is already there.

    ``model`` has a unique ``uid`` and a ``memory`` foreign key. A uid is unique on the whole
    install, so an entry whose uid another memory holds (an export folded into a second memory)
    gets a uid derived from it and this memory, which importing the same file again finds.
    """
    uids = list(dict.fromkeys(uids))
    derived = {uid: uuid.uuid5(uid, f"memory:{memory.pk}") for uid in uids}
    owners: dict[uuid.UUID, int] = {}
    for chunk in batched([*uids, *derived.values()], LOOKUP_BATCH):
        # Where a uid is already held, in any memory, to place an import's rows: no row's words
        # are read, so the plain manager (the read layer's rule is for what a reader is shown).
        owners.update(model._base_manager.filter(uid__in=chunk).values_list("uid", "memory_id"))
    found = {}
    for uid in uids:
        if owners.get(uid) == memory.pk:
            found[uid] = (uid, True)
        elif owners.get(derived[uid]) == memory.pk:
            found[uid] = (derived[uid], True)
        else:
            found[uid] = (derived[uid] if uid in owners else uid, False)
    return found


def placed(
    model: type[models.Model], memory: models.Model, data: list[dict]
) -> list[tuple[dict, uuid.UUID]]:
    """The entries not yet in ``memory``, each with the uid it gets there (see placements)."""
    where = placements(model, memory, (uuid.UUID(entry["uid"]) for entry in data))
    return [
        (entry, where[uid][0]) for entry in data if not where[(uid := uuid.UUID(entry["uid"]))][1]
    ]


def in_batches[T](items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` as lists of at most ``size``, for bulk writes and embedding."""
    for chunk in batched(items, size):
        yield list(chunk)


def remember(
    options: ImportOptions,
    key: str,
    model: type[models.Model],
    memory: models.Model,
    where: dict[uuid.UUID, tuple[uuid.UUID, bool]],
) -> None:
    """After a section wrote its new rows: tell the sections after it where each entry of the
    file is in ``memory`` (``options.here[key]``) and which this import added
    (``options.added[key]``). ``where`` is what ``placements`` answered before the writes."""
    pks: dict[uuid.UUID, int] = {}
    for chunk in in_batches((uid for uid, _ in where.values()), LOOKUP_BATCH):
        pks.update(
            model._base_manager.filter(memory=memory, uid__in=chunk).values_list("uid", "pk")
        )
    options.here.setdefault(key, {}).update(
        (uid, pks[here]) for uid, (here, _) in where.items() if here in pks
    )
    options.added.setdefault(key, set()).update(
        uid for uid, (_, present) in where.items() if not present
    )
