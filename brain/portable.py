"""The app-independent part of export and import: the error, the options, the ``Section`` every
app declares its part of the file with, the serializers its entries are (``Entry``, built on
Django REST framework's ``ModelSerializer``), and the uid rules sections share.

A section is an object with ``key``, ``dump(memory, context)``, ``check(data)`` and
``load(memory, data, options)``; ``surfaces.portable`` lists them in load order and
``memory.portable`` runs them. ``check`` sees only its own part of the file and raises
:class:`ImportRejected` naming the first bad entry; ``load`` runs inside the import's one
transaction, so anything it raises leaves nothing written. Nothing here knows any app's models.

Rules of a section (:class:`Section`, whose ``entries`` is a serializer):

- An entry's keys are the model's own fields, named once in ``Meta.fields`` (and
  ``Meta.keys`` where the file says it differently). Dumping, checking and building a row all
  read that one serializer, and every check comes from the field itself through DRF: its type,
  ``max_length``, ``choices``, ``null``, ``blank`` and ``validators`` (including the database's
  integer range), strict about JSON types, and each message says what a valid value looks like.
  A new column is one edit: add it to ``Meta.fields``.
- A key is required when the model has no default for it and refuses null and blank, or when
  ``Meta.extra_kwargs`` says so; a key the file leaves out takes the model's default, so files
  written before a column existed still import. A reference to another model's field (``ref``)
  is checked the same way, and the app resolves it when it loads.
- What spans keys is the serializer's ``validate_<key>`` and ``validate``; what spans entries
  (uids, how rows find each other) is its list serializer's ``validate`` (``Entries``), and
  ``load``.

An export is made for a reader (``export_context``): a person who may not read everything in
the memory gets only what they read. The reader is in the serializers' ``context``, and each
section's ``rows(memory, reader)`` narrows its rows by it through its app's read rule
(``readable_by``), which a section of a model's rows does by itself; the read layer's
``SYSTEM`` reads everything.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from itertools import batched
from typing import Any, ClassVar, cast

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.settings import api_settings
from rest_framework.validators import UniqueValidator

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


def when(value: str | None) -> datetime | None:
    """A checked date and time as an aware datetime; without an offset it is read in the
    current time zone. None stays None."""
    if value is None:
        return None
    moment = parse_datetime(value)
    if moment is None:
        raise ValueError(f"{value!r} is not a date and time; check it with is_datetime first")
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def refused(index: int, detail: Any) -> serializers.ValidationError:
    """A list serializer's refusal of its entry ``index`` (``said`` numbers it)."""
    return serializers.ValidationError(cast(Any, {index: detail}))


def refuse_repeats(keys: Iterable[tuple[int, Any]], repeats: str) -> None:
    """Refuse the first entry whose key an earlier one had: ``keys`` are each entry's index
    and key, ``repeats`` says what it repeats ("repeats an earlier procedure.")."""
    seen: set[Any] = set()
    for index, key in keys:
        if key in seen:
            raise refused(index, repeats)
        seen.add(key)


# Entries: a model's rows as DRF serializers ---------------------------------------------------

NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY


def _escaped(text: str) -> str:
    """``text`` as a literal inside a message DRF formats (``str.format``)."""
    return text.replace("{", "{{").replace("}", "}}")


class Checked(serializers.Field):
    """A key of the file, checked by its JSON type as well as its limits: ``7`` is not text,
    ``"7"`` not a number, ``1`` not true. Its messages say what a valid value looks like
    (``expected``), under the key it has in the file; any validator that refuses a value says
    it is invalid. Messages given as ``error_messages`` win over these."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.given = dict(kwargs.get("error_messages") or {})
        super().__init__(*args, **kwargs)

    def expected(self) -> str:
        return "a JSON value"

    def described(self) -> str:
        described = self.expected()
        return f"{described}, or null" if self.allow_null else described

    def bind(self, field_name: str, parent: Any) -> None:
        super().bind(field_name, parent)
        key, described = _escaped(field_name), _escaped(self.described())
        invalid = f'has an invalid "{key}" ({described}).'
        self.error_messages.update(
            required=f'has no "{key}" ({described}).',
            invalid=invalid,
            null=invalid,
            blank=f'has an empty "{key}".',
        )
        self.error_messages.update(self.given)

    def run_validators(self, value: Any) -> None:
        try:
            super().run_validators(value)
        except serializers.ValidationError:
            self.fail("invalid")


class AsIs:
    """A field whose value is written to the file as it is held: a number, true or false, one
    of its choices, or a JSON value."""

    def to_representation(self, value: Any) -> Any:
        return value


class Text(Checked, serializers.CharField):
    """Text, kept as it is written (no trimming); a field that refuses blank refuses text of
    spaces alone."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        if data == "" and self.allow_blank:
            return ""
        value = serializers.Field.run_validation(self, data)
        if isinstance(value, str) and not self.allow_blank and not value.strip():
            self.fail("blank")
        return value

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return data

    def expected(self) -> str:
        least = "" if self.allow_blank else "not empty, "
        if self.max_length is None:
            return "text" if self.allow_blank else "text, not empty"
        return f"text, {least}at most {self.max_length:,} characters"


class Whole(AsIs, Checked, serializers.IntegerField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return data

    def expected(self) -> str:
        return _ranged("a whole number", self.min_value, self.max_value)


class Number(AsIs, Checked, serializers.FloatField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, int | float) or isinstance(data, bool) or not math.isfinite(data):
            self.fail("invalid")
        return data

    def expected(self) -> str:
        return _ranged("a number", self.min_value, self.max_value)


def _ranged(what: str, low: Any, high: Any) -> str:
    if low is not None and high is not None:
        return f"{what} from {low:,} to {high:,}"
    if low is not None:
        return f"{what}, {low:,} or more"
    return what


class Flag(AsIs, Checked, serializers.BooleanField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data

    def expected(self) -> str:
        return "true or false"


class Moment(Checked, serializers.DateTimeField):
    """A date and time in ISO 8601, written as Python writes it; read without an offset, it is
    in the current time zone."""

    def to_internal_value(self, data: Any) -> Any:
        if not is_datetime(data):
            self.fail("invalid")
        return when(data)

    def to_representation(self, value: Any) -> Any:
        return value.isoformat()

    def expected(self) -> str:
        return "a date and time"


class Uid(Checked, serializers.UUIDField):
    def to_internal_value(self, data: Any) -> Any:
        if not is_uuid(data):
            self.fail("invalid")
        return uuid.UUID(data)

    def to_representation(self, value: Any) -> Any:
        return str(value)

    def expected(self) -> str:
        return "a uid"


class Choice(AsIs, Checked, serializers.ChoiceField):
    """One of the field's choices, exactly (``"1"`` is not ``1``, nor ``true``)."""

    def bind(self, field_name: str, parent: Any) -> None:
        allowed = ", ".join(str(choice) for choice in self.choices)
        self.given.setdefault(
            "invalid_choice",
            f"has an unknown {_escaped(field_name)} {{input!r}}: use one of {_escaped(allowed)}.",
        )
        super().bind(field_name, parent)

    def to_internal_value(self, data: Any) -> Any:
        if data == "" and self.allow_blank:
            return ""
        try:
            known = not isinstance(data, bool) and data in self.choices
        except TypeError:  # a list or an object
            known = False
        if not known:
            self.fail("invalid_choice", input=data)
        return data

    def expected(self) -> str:
        return f"one of {', '.join(str(choice) for choice in self.choices)}"


class Items(Checked, serializers.ListField):
    """A list, each item checked as ``child`` is (its type and limits)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            self.fail("invalid")
        try:
            items = [self.child.to_internal_value(item) for item in data]
            for item in items:
                self.child.run_validators(item)
        except serializers.ValidationError:
            self.fail("invalid")
        return items

    def to_representation(self, value: Any) -> Any:
        return [self.child.to_representation(item) for item in value]

    def expected(self) -> str:
        child = self.child.expected() if isinstance(self.child, Checked) else "a JSON value"
        return f"a list, each {child}"


class Json(AsIs, Checked, serializers.JSONField):
    def to_internal_value(self, data: Any) -> Any:
        return data  # parsed from JSON: whatever it is, it is a JSON value


# An entry's own uid: refused in one sentence whatever is wrong with it.
UID_MESSAGES = dict.fromkeys(("required", "invalid", "null"), "has an invalid uid.")


def accepts(field: serializers.Field, value: Any) -> bool:
    """Whether ``value`` passes ``field``'s checks."""
    try:
        field.run_validation(value)
    except serializers.ValidationError:
        return False
    return True


class Entries(serializers.ListSerializer):
    """A section's entries: each checked by the child (``Entry``), the first bad one refused
    (``{index: what is wrong}``); then ``validate`` for what spans entries, which raises
    ``refused(index, message)`` naming the entry. Entries with a uid never repeat one."""

    child: Any  # an Entry

    def to_internal_value(self, data: Any) -> list:
        if not isinstance(data, list):
            raise serializers.ValidationError({NON_FIELD: ["must be a list."]})
        checked = []
        for index, item in enumerate(data):
            try:
                checked.append(self.child.run_validation(item))
            except serializers.ValidationError as error:
                raise refused(index, error.detail) from None
        return checked

    def validate(self, attrs: list) -> list:
        if "uid" in self.child.fields:
            source = self.child.fields["uid"].source
            uids = enumerate(entry[source] for entry in attrs)
            refuse_repeats(uids, "repeats the uid of an earlier entry.")
        return attrs


class Entry(serializers.ModelSerializer):
    """One entry of a section: a row of ``Meta.model``, its keys the model's own fields, each
    checked by what the field says (type, ``max_length``, ``choices``, ``null``, ``blank`` and
    ``validators``, the database's integer range among them) through DRF's field for it, made
    strict about JSON types (``Checked``). A new column is one edit: add it to ``Meta.fields``.

    - ``Meta.keys`` names a field the file calls otherwise (``{"taught_by_name":
      "taught_by"}``); ``Meta.extra_kwargs`` narrows a field (``required``, ``min_value``,
      ``max_length``, ``allow_null``: the file may say null where the app fills a value in).
    - A key is required when the model has no default for it and refuses null and blank (DRF's
      rule); one the file leaves out takes the model's default, so files written before a column
      existed still import.
    - A reference to another row is a declared field (``ref``: checked as the field it names),
      placed in ``Meta.fields`` where the file writes it.
    - What spans keys is ``validate_<key>`` and ``validate``; what spans entries is the
      section's list serializer (``Entries``). Nothing here reads the database: rows are matched
      when they load.

    The serializer's ``context`` is the export's (``Export``): who it is for and what it
    worked out once.
    """

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: Text,
        models.TextField: Text,
        models.IntegerField: Whole,
        models.BigIntegerField: Whole,
        models.SmallIntegerField: Whole,
        models.PositiveIntegerField: Whole,
        models.PositiveSmallIntegerField: Whole,
        models.PositiveBigIntegerField: Whole,
        models.FloatField: Number,
        models.BooleanField: Flag,
        models.DateTimeField: Moment,
        models.UUIDField: Uid,
        models.JSONField: Json,
        ArrayField: Items,
    }
    serializer_choice_field = Choice
    default_error_messages = {"invalid": "is not an object."}

    class Meta:
        model: type[models.Model]
        list_serializer_class: type[serializers.ListSerializer] = Entries
        # Uniqueness is the import's to settle (an entry already here wins), never a refusal.
        validators: tuple = ()

    uid = Uid(error_messages=UID_MESSAGES)

    def build_standard_field(self, field_name: str, model_field: models.Field) -> tuple:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        kwargs["validators"] = [
            v for v in kwargs.get("validators", []) if not isinstance(v, UniqueValidator)
        ]
        kwargs.pop("allow_empty", None)  # an empty list is a list; a section says otherwise
        return field_class, kwargs

    def get_fields(self) -> dict[str, serializers.Field]:
        keys = getattr(self.Meta, "keys", {})
        fields = {}
        for name, built in super().get_fields().items():
            if name in keys:
                built.source = name
            fields[keys.get(name, name)] = built
        return fields

    @cached_property
    def own(self) -> list[tuple[str, serializers.Field, models.Field]]:
        """The keys that are the model's own fields: (key, DRF field, model field)."""
        own = []
        for key, checked in self.fields.items():
            if key not in self._declared_fields:
                found = self.Meta.model._meta.get_field(str(checked.source))
                assert isinstance(found, models.Field)  # built from the model's own fields
                own.append((key, checked, found))
        return own

    def values(self, entry: dict) -> dict[str, Any]:
        """A checked entry's own keys as keyword arguments for the model; a key the file leaves
        out is the model's default."""
        values = {}
        for key, checked, model_field in self.own:
            if key not in entry:
                values[model_field.name] = model_field.get_default()
            elif entry[key] is None:
                values[model_field.name] = None
            else:
                values[model_field.name] = checked.to_internal_value(entry[key])
        return values


def required(*keys: str) -> dict[str, dict[str, Any]]:
    """``Meta.extra_kwargs`` for keys the file must give although the model has a default."""
    return {key: {"required": True} for key in keys}


def between(low: float, high: float, *keys: str) -> dict[str, dict[str, Any]]:
    """``Meta.extra_kwargs`` for numbers from ``low`` to ``high`` the model leaves open."""
    return {key: {"min_value": low, "max_value": high} for key in keys}


def ref(field: models.Field | Any, **kwargs: Any) -> serializers.Field:
    """A key that names a row of another model by one of its fields (a subject's entity id, a
    room's name): checked as that field (a reference by uid is a ``Uid``). ``field`` is a field
    or a model's field descriptor (``Subject.entity_id``); ``kwargs`` are the DRF field's
    (``source`` where the row holds it, ``allow_null`` and ``allow_blank`` where the reference
    may be left empty); not required unless they say so."""
    found = getattr(field, "field", field)
    built_class, built = Entry().build_standard_field(found.name, found)
    return built_class(**{**built, "required": False, **kwargs})


class Chained(Entries):
    """Entries that point at others of the file by uid (``link``: the key of the validated
    entry that holds it, like a fact's successor): each names an entry of the file, and
    following them never comes back to where it started. ``missing`` and ``circle`` are the
    messages, ``{target}`` filled in."""

    link: ClassVar[str]
    missing: ClassVar[str]
    circle: ClassVar[str]

    def validate(self, attrs: list) -> list:
        attrs = super().validate(attrs)
        uid = self.child.fields["uid"].source
        indexes = {entry[uid]: index for index, entry in enumerate(attrs)}
        links = {entry[uid]: entry[self.link] for entry in attrs if entry.get(self.link)}
        for at, target in links.items():
            if target not in indexes:
                raise refused(indexes[at], self.missing.format(target=str(target)))
        done: set[uuid.UUID] = set()
        for start in links:
            path: list[uuid.UUID] = []
            step: uuid.UUID | None = start
            while step is not None and step not in done:
                if step in path:
                    raise refused(indexes[start], self.circle)
                path.append(step)
                step = links.get(step)
            done.update(path)
        return attrs


def said(detail: Any, where: str = "", name: str = "") -> str:
    """The first message of a DRF error ``detail`` as a sentence: about ``where`` (a
    section's entry, "facts entry 2"; a nested object, "facts entry 2's source"); ``name`` is
    the list an index is an entry of."""
    while isinstance(detail, dict | list):
        if isinstance(detail, list):
            detail = detail[0]
            continue
        key, inner = next(iter(detail.items()))
        if isinstance(key, int):
            where = f"{name} entry {key + 1}"
        elif key != NON_FIELD and isinstance(inner, dict):
            nested = next(iter(inner), None)
            if isinstance(nested, int):
                name = key
            elif nested != NON_FIELD:
                where = f"{where}'s {key}"
        detail = inner
    return f"{where} {detail}" if where else str(detail)


# Who an export is for ---------------------------------------------------------------------------


def export_context(reader: Any) -> dict[str, Any]:
    """The serializers' context for an export made for ``reader`` (a person, a ``Reader``, or
    the read layer's ``SYSTEM``: never None): ``reader``, whom the sections narrow their rows
    to, and ``memo``, what the export worked out once (a source as its reader may see it)."""
    if reader is None:
        raise ValueError("An export is made for a reader: name the person, or the system.")
    return {"reader": reader, "memo": {}}


# Sections -------------------------------------------------------------------------------------


class Section[Owner: models.Model]:
    """A part of the file: ``key``, and ``entries``, the serializer of its rows (an ``Entry``,
    ``many``: a list of entries, one per row) or of its one object (``many = False``: then
    ``where`` names it in messages and ``not_an_object`` says what it must be). Write ``load``,
    and say which rows the export serializes for its reader (``rows``). ``Owner`` is the model
    of the memory its rows are exported from and imported into (``Section[Memory]``).

    A section of its entries' model's rows (``Entry``'s ``Meta.model``) declares them, as
    Django's generic views declare their queryset: ``ordering`` (``order_by``), ``related``
    (``select_related``) and ``deferred`` (``defer``); its rows are then the model's rows in the
    memory, narrowed to what the reader may read when the model has a read rule
    (``readable_by``). A section that needs more (an annotation, a prefetch that names its
    reader) builds on ``super().rows``; one of other rows, or of one object, writes ``rows``.
    """

    key: ClassVar[str]
    entries: ClassVar[type[serializers.Serializer]]
    many: ClassVar[bool] = True
    where: ClassVar[str] = ""
    not_an_object: ClassVar[str] = ""
    ordering: ClassVar[tuple[str, ...]] = ()
    related: ClassVar[tuple[str, ...]] = ()
    deferred: ClassVar[tuple[str, ...]] = ()

    @cached_property
    def entry(self) -> Any:
        return self.entries()

    # Export

    def rows(self, memory: Owner, reader: Any) -> Any:
        """The memory's rows this section exports (or its one object), as ``reader`` may read
        them: by default its model's rows in ``memory``, as the section declares them."""
        model = getattr(getattr(self.entries, "Meta", None), "model", None)
        if model is None:
            raise NotImplementedError(f"{type(self).__name__} must say which rows it exports")
        rows = model._default_manager.filter(memory=memory)
        if hasattr(rows, "readable_by"):  # the model's rows carry a read rule
            rows = rows.readable_by(reader)
        if self.related:
            rows = rows.select_related(*self.related)
        if self.deferred:
            rows = rows.defer(*self.deferred)
        if self.ordering:
            rows = rows.order_by(*self.ordering)
        return rows

    def dump(self, memory: Owner, context: dict[str, Any]) -> Any:
        rows = self.rows(memory, context["reader"])
        return self.entries(rows, many=self.many, context=context).data

    # Checking

    def check(self, data: Any) -> None:
        if self.many:
            require(isinstance(data, list), f'"{self.key}" must be a list.')
        else:
            require(isinstance(data, dict), self.not_an_object)
        serializer = self.entries(data=data, many=self.many)
        if not serializer.is_valid():
            raise ImportRejected(said(serializer.errors, self.where, self.key))

    # Import

    def values(self, entry: dict) -> dict[str, Any]:
        """The entry's own keys as keyword arguments for the model."""
        return self.entry.values(entry)

    def load(self, memory: Owner, data: Any, options: ImportOptions) -> None:
        """Write the checked entries into ``memory``. Every section says how (abstract): what
        matches a row already here differs by section."""
        raise NotImplementedError(f"{type(self).__name__} must say how it imports")

    def summary(
        self, options: ImportOptions, name: str, added: int, total: int, note: str = ""
    ) -> None:
        """The report's line for this section: of ``total`` entries, ``added`` were new; ``note``
        says more, after the count of those already here."""
        options.report.append(f"{name}: {added} added, {total - added} already here{note}.")


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
