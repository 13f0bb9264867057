"""Every input is checked here before anything touches the database; bad input is a 4xx
naming the field, never a 500.

One rule for text, wherever it comes from (the address, a form, a JSON body, an MCP tool's
arguments — ``clean``):

- A NUL character (U+0000) cannot be stored in PostgreSQL text, and an unpaired surrogate
  (U+D800–U+DFFF on its own, which JSON's ``\\ud800`` can smuggle in) is not text at all and
  cannot even be written back in an error message. Either is refused with a message naming
  the field.
- Except in the words people search and filter with (``SEARCH_WORDS``): there they are
  dropped, and the search goes on with what is left, as a search box would.

Where it runs:

- ``InputMiddleware``: the address's parameters and form bodies of every view, the body's size,
  and the shape of a JSON body (valid UTF-8, nesting depth), before the view runs. An API view
  (DRF) answers ``{"detail": "..."}``; an htmx request a 400 whose ``HX-Trigger`` raises an
  error toast (htmx swaps nothing on a 4xx, so without it the button would seem to do
  nothing); a page the plain ``400.html``.
- ``JSONParser``: DRF's parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``), through
  ``load_json``, which any view reading JSON itself calls too: size and depth bounded before
  ``json.loads``, then ``clean`` over every key and string.
- ``posted``: an API view's body read by the view's serializer; what does not fit is a 400
  naming the field.
- ``CursorPages``: cursor pagination whose ``?cursor=`` is checked against the ordering field
  before it filters; a cursor this API did not give out is a 400.

The limits:

- ``MAX_BODY_BYTES`` = 1 MiB. The largest thing any request carries is the memory document,
  at most 64 KB (``knowledge.models.MEMORY_MAX_KB_RANGE``); JSON escaping grows text by at
  most six times (a control character becomes ``\\u00XX``), so 384 KB is the worst honest
  body. 1 MiB leaves room and keeps a request's parsing to milliseconds. Larger is a 413.
- A view that takes more (a whole conversation: ``memory.conversations``, up to 2 MB of words)
  says so with ``@allows_body(bytes)``; its body is bounded by that instead, and still checked
  for everything else. ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (settings) is the largest such limit.
- ``MAX_JSON_DEPTH`` = 32. The deepest body brain reads is two levels (an object holding a
  list of subject names). Python's ``json`` and DRF's serializers recurse once per level, so
  100,000 levels exhaust the stack (a ``RecursionError``); 32 is far from both.
"""

from __future__ import annotations

import contextlib
import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import (
    FieldDoesNotExist,
    SuspiciousOperation,
    ValidationError,
)
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import parsers, serializers, status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.pagination import CursorPagination

from brain import htmx

if TYPE_CHECKING:
    from django.http.request import _ImmutableQueryDict
    from rest_framework.request import Request

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32
# Free text people search or filter with: a NUL or a surrogate there is dropped, not refused.
SEARCH_WORDS = frozenset({"q", "query", "question", "goal", "search", "subject", "taught_by"})

_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")
# A JSON string, written to run in linear time (no alternation per character).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class BadInput(ValueError):
    """Input refused before it was used. ``message`` names the field and what to do instead;
    ``status`` is 400, or 413 for a body over the size limit."""

    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def _shown(name: str) -> str:
    """A field name as it can be printed in a message: escapes for what is not printable
    (a surrogate in the message would make the message itself unwritable), at most 60."""
    shown = "".join(
        character
        if character.isprintable() and not _SURROGATE.match(character)
        else f"\\u{ord(character):04x}"
        for character in name[:60]
    )
    return shown + ("…" if len(name) > 60 else "")


def clean_text(field: str, value: str) -> str:
    """``value`` if it is text brain can store; with the NULs and unpaired surrogates dropped
    when ``field`` is a search word; else BadInput naming ``field``."""
    if not _BAD_CHARACTER.search(value):
        return value
    if field in SEARCH_WORDS:
        return _BAD_CHARACTER.sub("", value)
    surrogate = _SURROGATE.search(value)
    if "\x00" in value or surrogate is None:  # what _BAD_CHARACTER found is one or the other
        raise BadInput(
            f"“{_shown(field)}” contains a NUL character (U+0000), which brain cannot store. "
            "Remove it and send again."
        )
    raise BadInput(
        f"“{_shown(field)}” contains an unpaired surrogate (U+{ord(surrogate.group()):04X}), "
        "which is not text. Send it as valid UTF-8."
    )


def clean_name(name: str) -> str:
    if _BAD_CHARACTER.search(name):
        raise BadInput(
            f"A field name (“{_shown(name)}”) contains a NUL character or an unpaired "
            "surrogate. Send field names in plain text."
        )
    return name


def clean(field: str, value: Any) -> Any:
    """``clean_text`` over every string and key in ``value`` (a JSON value or a tool's
    argument). Strings in a list or an object take the name of the field that holds them."""
    if isinstance(value, str):
        return clean_text(field, value)
    if isinstance(value, list):
        return [clean(field, item) for item in value]
    if isinstance(value, dict):
        return {clean_name(key): clean(key, item) for key, item in value.items()}
    return value


def _clean_query(field_values: QueryDict) -> _ImmutableQueryDict | None:
    """A copy of ``field_values`` with search words cleaned, or None if nothing changed.
    Raises BadInput for anything else that is not storable text."""
    changed = False
    cleaned = QueryDict(mutable=True)
    for name, values in field_values.lists():
        clean_name(name)
        kept = [clean_text(name, value) for value in values]
        changed = changed or kept != values
        cleaned.setlist(name, kept)
    if not changed:
        return None
    cleaned._mutable = False
    # Immutable from here on, as request.GET and request.POST are; the stubs only know a
    # QueryDict made with mutable=False as immutable.
    return cast("_ImmutableQueryDict", cleaned)


def moment(text: str) -> datetime | None:
    """An aware datetime in UTC from ISO 8601 text (a naive one is in the current time zone),
    or None when the text names no moment brain can store: not a date and time, an impossible
    one (month 13), or one whose offset PostgreSQL refuses (past ±15:59) and that does not
    fit the calendar once converted to UTC."""
    try:
        parsed = parse_datetime(text)
        if parsed is None:
            return None
        if timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


# JSON ----------------------------------------------------------------------------------------


def _limit_text(limit: int) -> str:
    return f"{limit / (1024 * 1024):g} MiB"


def _check_size(size: int, limit: int = MAX_BODY_BYTES) -> None:
    if size > limit:
        raise BadInput(
            f"The request body is {size:,} bytes; brain accepts at most {limit:,} "
            f"({_limit_text(limit)}) here.",
            status=413,
        )


def allows_body(max_bytes: int):
    """Mark a view that accepts a body of up to ``max_bytes`` instead of MAX_BODY_BYTES. Put it
    above every other decorator (it marks the function the URL resolves to)."""

    def mark(view):
        view.max_body_bytes = max_bytes
        return view

    return mark


def body_limit(request) -> int:
    """The body limit of the view ``request`` is for (set by ``InputMiddleware``)."""
    return getattr(request, "max_body_bytes", MAX_BODY_BYTES)


def _decoded(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("The body is not valid UTF-8, which JSON must be.") from None


def check_json_shape(raw: bytes | str, *, limit: int = MAX_BODY_BYTES) -> str:
    """The body as text, once its size, encoding and nesting are within bounds."""
    _check_size(len(raw), limit)
    text = _decoded(raw)
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise BadInput(
                    f"The JSON body nests deeper than {MAX_JSON_DEPTH} levels; brain's "
                    "requests nest two at most. Send a flatter body."
                )
        else:
            depth -= 1
    return text


def _no_constants(word: str) -> None:
    raise ValueError(f"{word} is not a JSON value")


def load_json(raw: bytes | str, *, limit: int = MAX_BODY_BYTES) -> Any:
    """JSON parsed within brain's limits and cleaned: the one way a body becomes data.
    Raises BadInput naming what is wrong."""
    text = check_json_shape(raw, limit=limit)
    try:
        data = json.loads(text, parse_constant=_no_constants)
    except ValueError as error:  # JSONDecodeError, NaN, an integer past 4,300 digits
        raise BadInput(f"The body is not valid JSON: {error}.") from None
    return clean("body", data)


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser through ``load_json``: bounded, strict, cleaned."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = body_limit(getattr(request, "_request", request))
        raw = stream.read(limit + 1)
        try:
            return load_json(raw, limit=limit)
        except BadInput as bad:
            if bad.status == 413:
                raise BodyTooLarge(bad.message) from None
            raise ParseError(bad.message) from None


def posted(serializer_class: type[serializers.Serializer], request: Request) -> dict:
    """An API view's body as ``serializer_class`` reads it; its ValidationError (a 400 naming
    each field and what is wrong with it) when the body does not fit."""
    form = serializer_class(data=request.data)
    form.is_valid(raise_exception=True)
    return form.validated_data


# Cursors -------------------------------------------------------------------------------------

BAD_CURSOR = (
    "This cursor is not one this API gave out. Follow a page's next or previous link, or "
    "leave cursor out for the first page."
)


class CursorPages(CursorPagination):
    """Cursor pagination whose cursor is checked before it filters: a cursor that does not
    decode, or whose position is not a value of the ordering field, is a 400 (DRF's own
    answers 404, or 500 for a position the database cannot compare)."""

    def paginate_queryset(self, queryset, request, view=None):
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except APIException:
            raise ParseError(BAD_CURSOR) from None
        if cursor is None or cursor.position is None:
            return cursor
        # DRF decodes the position from the address as text; its stubs say int.
        if _BAD_CHARACTER.search(cursor.position):  # type: ignore[call-overload]
            raise ParseError(BAD_CURSOR)
        try:
            field = self._model._meta.get_field(self.ordering[0].lstrip("-"))
        except FieldDoesNotExist:
            return cursor  # an annotation, compared as text
        try:
            field.get_prep_value(field.to_python(cursor.position))
        except (ValidationError, ValueError, TypeError, OverflowError):
            raise ParseError(BAD_CURSOR) from None
        return cursor


# The middleware ------------------------------------------------------------------------------


def refusal(request: HttpRequest, view_func, bad: BadInput) -> HttpResponse:
    """How a refusal is answered: JSON for the API, a toast for htmx, a page otherwise."""
    if getattr(view_func, "cls", None) is not None:  # a DRF view
        return JsonResponse({"detail": bad.message}, status=bad.status)
    if getattr(request, "htmx", False):
        response = HttpResponse(bad.message, status=bad.status, content_type="text/plain")
        return htmx.raise_toast(response, htmx.Toast(bad.message, "error"))
    return render(request, "400.html", {"exception": bad.message}, status=bad.status)


def _is_json(request: HttpRequest) -> bool:
    kind = request.content_type or ""
    return kind == "application/json" or kind.endswith("+json")


class InputMiddleware:
    """Checks the address's parameters, form bodies and JSON bodies before the view runs
    (after sign-in and CSRF, so those answer first). Search words are cleaned in place. A page
    view that finds a value no form of its page sends raises ``BadInput`` too, and is answered
    here the same way (``refusal``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        limit = getattr(view_func, "max_body_bytes", MAX_BODY_BYTES)
        request.max_body_bytes = limit  # type: ignore[attr-defined]  # read by body_limit
        try:
            self.check(request)
        except BadInput as bad:
            return refusal(request, view_func, bad)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception):
        if isinstance(exception, BadInput):  # a page view's: DRF answers its views' own
            return refusal(request, None, exception)
        return None

    def check(self, request: HttpRequest) -> None:
        length = 0
        with contextlib.suppress(ValueError):  # Django reads no body without a length
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        _check_size(length, body_limit(request))  # BadInput is a ValueError: not suppressed
        cleaned = _clean_query(request.GET)
        if cleaned is not None:
            request.GET = cleaned
        if _is_json(request):
            check_json_shape(request.body, limit=body_limit(request))
            return
        try:
            cleaned = _clean_query(request.POST)
        except (MultiPartParserError, SuspiciousOperation) as error:
            raise BadInput(f"The form could not be read: {error}") from None
        if cleaned is not None:
            request.POST = cleaned
