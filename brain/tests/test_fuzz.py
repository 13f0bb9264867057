"""Every endpoint and form, fed generated input: never a 5xx, and nothing written on a 4xx.

The routes come from the URL resolver (``brain/tests/endpoints.py``), so a new endpoint is
fuzzed without being listed; the field names from every serializer and every form in the
templates, so a new field is too. The input: text with NULs, unpaired surrogates, right-to-left
marks and astral characters, empty and oversized strings, integers past 64 bits, numbers where
text goes and text where numbers go, JSON nested past the limit or not JSON at all, bytes that are
not UTF-8, forged cursors, and a body over the size limit.

One fixed, derandomized profile so CI sees the same inputs every run; ``BRAIN_FUZZ_EXAMPLES``
(default 8 per route) runs more when hunting. A failure prints the request that caused it.
"""

from __future__ import annotations

import json
import os
import re
from base64 import b64encode
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.db import connection
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from brain import inputs
from brain.tests.endpoints import Route, routes
from knowledge.models import Conflict, Memory, Source
from memory import actions, consolidator, revisions
from memory.models import Origin
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses

pytestmark = pytest.mark.django_db

OUR_APPS = ("brain", "knowledge", "memory", "review", "agent", "surfaces")
FUZZ = settings(
    max_examples=int(os.environ.get("BRAIN_FUZZ_EXAMPLES", "8")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# Names to fill ---------------------------------------------------------------------------------


def _serializer_fields() -> set[str]:
    names: set[str] = set()
    pending = [serializers.Serializer]
    while pending:
        serializer = pending.pop()
        pending.extend(serializer.__subclasses__())
        if serializer.__module__.split(".")[0] in OUR_APPS:
            names |= set(serializer._declared_fields)
            names |= set(getattr(getattr(serializer, "Meta", None), "fields", ()) or ())
    return names


def _form_fields() -> set[str]:
    folders = [Path(folder) for folder in django_settings.TEMPLATES[0]["DIRS"]]
    folders += [Path(apps.get_app_config(app).path) / "templates" for app in OUR_APPS]
    names: set[str] = set()
    for folder in folders:
        for template in folder.rglob("*.html"):
            names |= set(re.findall(r'name="([a-z_]+)"', template.read_text()))
    return names


# What views read from the address (knowledge.api.FILTER_PARAMETERS and the pages' own).
QUERY_NAMES = [
    "memory", "q", "subject", "subject_kind", "kind", "channel", "taught_by", "status", "sort",
    "as_of", "cursor", "page", "page_size", "limit", "chip", "edit", "next",
]  # fmt: skip
FIELDS = sorted(_serializer_fields() | _form_fields() | set(QUERY_NAMES))


# Values ----------------------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    "\x00",
    "The gate\x00code box",
    "\ud800",
    "lone \udfff low",
    "\u202eevil",
    "\ufeffbom",
    "𝄞 astral",
    "x" * 1001,
    "y" * 5000,
    "9" * 30,
    "-1",
    "0",
    "1e309",
    "NaN",
    "null",
    "true",
    "<script>alert(1)</script>",
    "'; DROP TABLE knowledge_fact;--",
    "%00",
    "../../etc/passwd",
    "2026-13-45T99:00:00Z",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+14:00",
    "2026-02-30",
    str(2**31),
    str(2**63),
    str(-(2**63) - 1),
    str(10**30),
    "home",
    "newest",
    "subject",
    "contradiction",
    "high",
]
characters = st.one_of(
    st.characters(), st.sampled_from(["\x00", "\ud800", "\udc00", "\u202e", "\ufeff", "é", "𝄞"])
)
# The listed values twice as often as made-up text: they are where the bugs were.
texts = st.one_of(st.sampled_from(NASTY), st.sampled_from(NASTY), st.text(characters, max_size=40))
integers = st.one_of(
    st.integers(-5, 5), st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30, 10**300])
)


def _cursor(raw: str) -> str:
    return b64encode(raw.encode("utf-8", "surrogatepass")).decode()


cursors = st.one_of(
    texts.map(lambda text: _cursor(f"p={quote(text.encode('utf-8', 'surrogatepass'))}")),
    texts.map(lambda text: _cursor(f"o={text}&r={text}")),
    st.binary(max_size=20).map(lambda raw: b64encode(raw).decode()),
)
query_values = st.one_of(texts, integers.map(str), cursors)
json_scalars = st.one_of(
    st.none(), st.booleans(), integers, st.floats(allow_nan=True, allow_infinity=True), texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.one_of(st.sampled_from(FIELDS), texts), inner, max_size=4)
    ),
    max_leaves=8,
)
field_names = st.one_of(st.sampled_from(FIELDS), texts)


def _encoded(text: str) -> str:
    """Percent-encoded as a browser would, unpaired surrogates included (as their bytes)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _urlencoded(pairs: dict[str, str]) -> str:
    return "&".join(f"{_encoded(name)}={_encoded(value)}" for name, value in pairs.items())


queries = st.dictionaries(
    st.one_of(st.sampled_from(QUERY_NAMES), st.sampled_from(QUERY_NAMES), field_names),
    query_values,
    max_size=3,
).map(_urlencoded)


def _deep(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
bodies = st.one_of(
    st.dictionaries(field_names, json_values, max_size=6).map(
        lambda data: (json.dumps(data).encode(), JSON)
    ),
    json_values.map(lambda data: (json.dumps(data).encode(), JSON)),
    st.sampled_from([inputs.MAX_JSON_DEPTH + 1, 1000, 100_000]).map(lambda n: (_deep(n), JSON)),
    st.binary(max_size=40).map(lambda raw: (raw, JSON)),
    st.dictionaries(field_names, query_values, max_size=6).map(
        lambda pairs: (_urlencoded(pairs).encode(), FORM)
    ),
    st.tuples(st.binary(max_size=40), st.sampled_from(["text/plain", "multipart/form-data", ""])),
    st.just((b"x" * (inputs.MAX_BODY_BYTES + 1), JSON)),
)


@dataclass(frozen=True)
class Sent:
    method: str
    url: str
    body: bytes
    content_type: str
    htmx: bool

    def __repr__(self) -> str:  # what a failure prints
        return f"{self.method.upper()} {self.url} {self.content_type!r} {self.body[:300]!r}" + (
            " (htmx)" if self.htmx else ""
        )


@st.composite
def requests(draw, route: Route, ids: list[int]) -> Sent:
    """``ids``: the row the route names first, then others, then ids of no row."""
    method = draw(st.sampled_from(route.methods))
    url = route.url(**{name: draw(st.sampled_from(ids)) for name in route.params})
    query = draw(queries)
    body, content_type = draw(bodies) if method != "get" else (b"", "")
    return Sent(
        method=method,
        url=url + (f"?{query}" if query else ""),
        body=body,
        content_type=content_type,
        htmx=draw(st.booleans()),
    )


# A house with one of everything, so ids name real rows -----------------------------------------

# The row a route's id names, by the path segment before it; other ids are drawn too.
ROWS_BY_SEGMENT = {
    "facts": "fact",
    "waiting": "item",
    "inbox": "item",
    "conflicts": "conflict",
    "runs": "run",
    "findings": "finding",
    "guesses": "guess",
    "rules": "rule",
    "changes": "change",
    "sources": "source",
}
MISSING_IDS = [0, 2**31, 2**63, 10**30]


@pytest.fixture
def world(admin_user) -> dict[str, int]:
    home = Memory.objects.default()
    old = actions.learn(
        Statement.typed(
            memory=home,
            text="The porch light stays on until ten.",
            origin=Origin.TYPED,
            by=admin_user,
        )
    )
    new = actions.learn(
        Statement.typed(
            memory=home, text="The loft hatch sticks in winter.", origin=Origin.TYPED, by=admin_user
        )
    )
    conflict = Conflict.objects.create(memory=home, old=old.fact, new=new.fact, reason="fuzz")
    change = revisions.save_user_edit(
        memory=home, text="- The boiler is in the cellar.\n", base_generation=0
    )[0]
    run = consolidator.request_consolidation(memory=home, trigger="api", send=False).run
    finding, quiet = (
        review_findings.raise_finding(
            memory=home, check_id=check, entity_id="", severity="low", text=f"{check} at 3am"
        ).finding
        for check in ("night_motion", "door_left_open")
    )
    rule = review_findings.not_a_problem(finding=quiet, by=admin_user, reason="the cat")
    guess = review_guesses.propose_guess(memory=home, text="The garage fridge runs 24/7").guess
    source = Source.objects.create(memory=home, kind=Source.Kind.values[0], title="A manual")
    old.fact.source = source
    old.fact.save(update_fields=["source"])
    return {
        "fact": old.fact.pk,
        "item": old.item.pk,
        "conflict": conflict.pk,
        "change": change.number,
        "run": run.pk,
        "finding": finding.pk,
        "rule": rule.pk,
        "guess": guess.pk,
        "source": source.pk,
    }


def _real_id(route: Route, world: dict[str, int]) -> int:
    before_id = route.path.split("<")[0].rstrip("/").split("/")[-1]
    return world.get(ROWS_BY_SEGMENT.get(before_id, ""), world["fact"])


def _tables() -> list[str]:
    return [
        model._meta.db_table
        for app in OUR_APPS
        if apps.is_installed(app)
        for model in apps.get_app_config(app).get_models()
    ]


def _counts(tables: list[str]) -> tuple[int, ...]:
    """Rows in every table of brain's apps, in one round trip."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {table})" for table in tables))
        return cursor.fetchone()


def _known_bad(route: Route, row: int) -> list[Sent]:
    """Every kind of input once seen to be a 500, sent to this route (naming a real row) before
    the generated ones."""
    url = route.url(**{name: row for name in route.params})
    method = route.methods[0]
    huge = 10**30
    known = [
        Sent(method, url + "?memory=%00", b"", "", False),
        Sent(method, url + "?q=%00&taught_by=%00&subject=%ED%A0%80", b"", "", True),
        Sent(method, url + "?cursor=" + _cursor("p=2026"), b"", "", False),
        Sent(method, url + f"?page={huge}&page_size={huge}&limit={huge}", b"", "", True),
        Sent(method, url + "?as_of=2026-13-45T99:00:00Z", b"", "", False),
        Sent(method, url + "?as_of=9999-12-31T23:59:59-23:59", b"", "", False),
    ]
    for write in [method for method in route.methods if method != "get"]:
        for bad in ("\x00", "\ud800"):
            every_field = {name: f"a{bad}b" for name in FIELDS}
            known += [
                Sent(write, url, json.dumps(every_field).encode(), JSON, False),
                Sent(write, url, _urlencoded(every_field).encode(), FORM, True),
            ]
        known.append(Sent(write, url, _deep(100_000), JSON, False))
    return known


def _fuzz(client, route: Route, world: dict[str, int], tables: list[str]) -> None:
    row = _real_id(route, world)
    ids = [row, *sorted(set(world.values()) - {row}), *MISSING_IDS]
    counted = {"rows": _counts(tables)}

    def fuzz(sent: Sent) -> None:
        response = client.generic(
            sent.method.upper(),
            sent.url,
            data=sent.body,
            content_type=sent.content_type,
            headers={"HX-Request": "true"} if sent.htmx else {},
        )
        assert response.status_code < 500, (sent, response.content[:500])
        rows = _counts(tables)
        if 400 <= response.status_code < 500:
            assert rows == counted["rows"], (sent, response.status_code, response.content[:300])
        counted["rows"] = rows

    test = given(sent=requests(route, ids))(fuzz)
    for sent in _known_bad(route, row):
        test = example(sent=sent)(test)
    FUZZ(test)()


def test_generated_input_never_gets_a_5xx_nor_writes_anything_on_a_4xx(client, admin_user, world):
    """One house for every route (building it costs more than fuzzing a route), and every
    route fuzzed even after one fails, so a run names them all."""
    client.force_login(admin_user)
    tables = _tables()
    failures = []
    for route in routes():
        try:
            _fuzz(client, route, world, tables)
        except Exception as failure:  # reported together below, with the falsifying request
            notes = "\n".join(getattr(failure, "__notes__", []))
            failures.append(f"{route.name} ({route.path}): {failure!r}"[:1500] + f"\n{notes}")

    assert not failures, "\n\n".join(failures)
