"""Bad input is refused before it reaches the database: a 4xx naming the field, never a 500.

Each case here was once a 500 seen from outside: NUL characters in the address or a form, a
JSON body nested 100,000 deep, an unpaired surrogate in a choice, a forged cursor, and a NUL
sent to the MCP server's memory_write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from base64 import b64encode
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.db import connection

from brain import inputs
from brain.testing import database_url, run_async
from brain.tests.endpoints import api_routes, json_write_routes
from knowledge.models import Fact, Memory
from memory import actions
from memory.models import DocumentRevision, InboxItem, Origin
from memory.taught import Statement
from memory.tests.test_mcp import Agent, drive

pytestmark = pytest.mark.django_db

GATE = "The gate code box is behind the ivy."


@pytest.fixture
def gate_fact(home, admin_user) -> Fact:
    return actions.learn(
        Statement.typed(memory=home, text=GATE, origin=Origin.TYPED, by=admin_user)
    ).fact


def _stored() -> tuple[int, int, int]:
    return Fact.objects.count(), InboxItem.objects.count(), DocumentRevision.objects.count()


def _detail(response) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return response.json()["detail"]


# The address ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "route", [route for route in api_routes() if "get" in route.methods], ids=lambda r: r.name
)
def test_a_nul_in_the_memory_parameter_is_a_400_naming_it_on_every_api_endpoint(
    signed_in, route, gate_fact
):
    url = route.url(**{name: gate_fact.pk for name in route.params})

    response = signed_in.get(url + "?memory=%00")

    assert response.status_code == 400
    detail = _detail(response)
    assert "memory" in detail and "NUL" in detail


@pytest.mark.parametrize("word", ["q", "taught_by", "subject"])
def test_a_nul_in_a_search_word_is_dropped_and_the_search_still_answers(signed_in, gate_fact, word):
    value = {"q": "ga\x00te", "taught_by": "a\x00da", "subject": "\x00"}[word]

    response = signed_in.get("/api/facts/?" + urlencode({word: value}))

    if word == "subject":  # an empty subject names nothing; the filter says so
        assert response.status_code in (200, 400)
        assert "NUL" not in response.content.decode()
    else:
        assert response.status_code == 200
        assert [fact["text"] for fact in response.json()["results"]] == [GATE]


def test_the_facts_list_on_the_knowledge_tab_drops_a_nul_in_its_search(signed_in, gate_fact):
    partial = signed_in.get(
        "/knowledge/facts?q=ga%00te&taught_by=%00", headers={"HX-Request": "true"}
    )
    page = signed_in.get("/knowledge/?q=ga%00te")

    assert partial.status_code == 200 and GATE in partial.content.decode()
    assert page.status_code == 200 and GATE in page.content.decode()


def test_a_nul_in_the_memory_parameter_of_a_page_is_a_plain_400_page(signed_in):
    response = signed_in.get("/knowledge/?memory=%00")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "memory" in page and "NUL" in page
    assert "Traceback" not in page


# Forms ---------------------------------------------------------------------------------------


def test_teaching_a_text_with_a_nul_is_a_400_page_naming_the_field_and_stores_nothing(signed_in):
    before = _stored()

    response = signed_in.post("/knowledge/teach", {"text": "The gate\x00code box"})

    assert response.status_code == 400
    page = response.content.decode()
    assert "text" in page and "NUL" in page
    assert _stored() == before


def test_teaching_a_text_with_a_nul_from_htmx_is_a_400_that_raises_an_error_toast(signed_in):
    before = _stored()

    response = signed_in.post(
        "/knowledge/teach", {"text": "The gate\x00code box"}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 400
    toast = json.loads(response["HX-Trigger"])["showToast"]
    assert toast["level"] == "error"
    assert "text" in toast["text"] and "NUL" in toast["text"]
    assert _stored() == before


# JSON bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "method"),
    json_write_routes(),
    ids=lambda value: value if isinstance(value, str) else value.name,
)
def test_a_json_body_nested_100000_deep_is_a_400_on_every_json_endpoint(
    signed_in, gate_fact, route, method
):
    url = route.url(**{name: gate_fact.pk for name in route.params})
    before = _stored()

    response = getattr(signed_in, method)(
        url, "[" * 100_000 + "]" * 100_000, content_type="application/json"
    )

    assert response.status_code == 400
    assert "nest" in _detail(response)
    assert _stored() == before


def test_a_body_over_the_size_limit_is_refused_before_it_is_read(signed_in):
    before = _stored()
    huge = json.dumps({"text": "x" * (inputs.MAX_BODY_BYTES + 1)})

    response = signed_in.post("/api/memory/inbox", huge, content_type="application/json")

    assert response.status_code == 413
    assert f"{inputs.MAX_BODY_BYTES:,}" in _detail(response)
    assert _stored() == before


def test_an_unpaired_surrogate_in_a_choice_is_a_400_naming_the_field(signed_in):
    before = _stored()

    response = signed_in.post(
        "/api/memory/inbox",
        '{"text": "The loft is warm", "confidence": "\\ud800"}',
        content_type="application/json",
    )

    assert response.status_code == 400
    detail = _detail(response)
    assert "confidence" in detail and "surrogate" in detail
    assert _stored() == before


def test_a_nul_in_a_json_text_is_a_400_naming_the_field(signed_in):
    before = _stored()

    response = signed_in.post(
        "/api/memory/add",
        '{"fact": "The gate\\u0000code box", "subjects": ["x\\u0000"]}',
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "fact" in _detail(response) and "NUL" in _detail(response)
    assert _stored() == before


def test_a_json_body_that_is_not_utf8_is_a_400(signed_in):
    response = signed_in.post(
        "/api/memory/inbox", b'{"text": "\xff\xfe"}', content_type="application/json"
    )

    assert response.status_code == 400


# Dates and numbers --------------------------------------------------------------------------


@pytest.mark.parametrize("as_of", ["2026-13-45T99:00:00Z", "9999-12-31T23:59:59-23:59"])
def test_an_as_of_no_calendar_or_database_can_hold_is_a_400_naming_it(signed_in, as_of):
    response = signed_in.get("/api/facts/?" + urlencode({"as_of": as_of}))

    assert response.status_code == 400
    assert "as_of" in _detail(response)


def test_a_page_number_past_every_fact_shows_no_rows_rather_than_failing(signed_in, gate_fact):
    huge = str(10**30)

    page = signed_in.get(f"/knowledge/?page={huge}")
    rows = signed_in.get(f"/knowledge/facts?page={huge}", headers={"HX-Request": "true"})

    assert page.status_code == 200
    assert rows.status_code == 200 and GATE not in rows.content.decode()


def test_a_rule_until_a_moment_the_database_cannot_hold_is_a_400_and_no_rule(signed_in, home):
    from review import findings as review_findings
    from review.models import Rule

    finding = review_findings.raise_finding(
        memory=home, check_id="night_motion", entity_id="", severity="low", text="Motion at 3am"
    ).finding

    response = signed_in.post(
        f"/api/findings/{finding.pk}/not-a-problem",
        {"until": "9999-12-31T23:59:59-23:59"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "until" in response.content.decode()
    assert not Rule.objects.exists()


# Cursors -------------------------------------------------------------------------------------


def _cursor(raw: str) -> str:
    return b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    ("sort", "cursor"),
    [
        ("newest", "garbage"),
        ("newest", _cursor("p=2026")),
        ("newest", _cursor("p=2026-13-45T99:00:00Z")),
        ("certain", _cursor("p=very")),
        ("subject", _cursor("p=%00")),
        ("oldest", _cursor("o=x")),
        ("oldest", _cursor("r=maybe&p=1")),
    ],
)
def test_a_forged_cursor_is_a_400_saying_to_follow_the_links(signed_in, gate_fact, sort, cursor):
    response = signed_in.get("/api/facts/?" + urlencode({"sort": sort, "cursor": cursor}))

    assert response.status_code == 400
    assert "cursor" in _detail(response)


def test_a_cursor_the_api_gave_out_still_pages(signed_in, home, admin_user):
    for number in range(3):
        actions.learn(
            Statement.typed(
                memory=home, text=f"Shelf {number} holds paint.", origin=Origin.TYPED, by=admin_user
            )
        )

    first = signed_in.get("/api/facts/?page_size=2&sort=subject").json()
    second = signed_in.get(first["next"]).json()

    assert len(first["results"]) == 2 and len(second["results"]) == 1


def test_a_forged_cursor_on_the_timeline_is_a_400(signed_in):
    response = signed_in.get("/api/timeline/?cursor=" + _cursor("p=yesterday"))

    assert response.status_code == 400
    assert "cursor" in _detail(response)


# The MCP server ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_mcp_server_refuses_a_nul_naming_the_argument_and_logs_no_traceback(alice):
    seen: dict = {}

    async def scenario(agent: Agent, tools: dict) -> None:
        seen["write"] = await agent.refused("memory_write", content="The gate\x00code box")
        seen["search"] = await agent.call("memory_search", query="gate\x00code")
        assert (await agent.call("memory_status"))["facts_known"] == 0

    logged = drive(scenario, "--user", "alice")

    assert "content" in seen["write"] and "NUL" in seen["write"]
    assert seen["search"] == {"facts": []}
    assert "Traceback" not in logged
    assert "DataError" not in logged
    assert not Fact.objects.exists()


def test_a_tool_refuses_an_unpaired_surrogate_naming_the_argument_and_cleans_a_search():
    # The SDK's client cannot even encode one; another client could send "\\ud800" in JSON.
    from mcp.server.mcpserver.exceptions import ToolError

    from memory.mcp_server import tool_errors

    @tool_errors
    async def memory_echo(content: str = "", query: str = "") -> tuple[str, str]:
        return content, query

    with pytest.raises(ToolError, match="“content” contains an unpaired surrogate"):
        run_async(lambda: memory_echo(content="The gate \ud800 box"))
    assert run_async(lambda: memory_echo(query="ga\ud800te\x00")) == ("", "gate")


def test_an_unexpected_error_in_a_tool_is_a_tool_error_naming_the_tool_and_no_traceback(caplog):
    from mcp.server.mcpserver.exceptions import ToolError

    from memory.mcp_server import tool_errors

    @tool_errors
    async def memory_broken(content: str) -> None:
        raise RuntimeError("the disk is on fire")

    with pytest.raises(ToolError) as refused:
        run_async(lambda: memory_broken(content="hello"))

    assert "memory_broken" in str(refused.value)
    assert "RuntimeError" in str(refused.value)
    assert all(record.exc_info is None for record in caplog.records if record.levelno >= 30)


def _example(schema: dict, text: str):
    """A value of ``schema`` carrying ``text`` wherever it takes text; None if it takes none."""
    kinds = [schema, *schema.get("anyOf", [])]
    if any(kind.get("type") == "string" for kind in kinds):
        return text
    for kind in kinds:
        if kind.get("type") == "array" and kind.get("items", {}).get("type") == "string":
            return [text]
    return None


def _plain(schema: dict):
    kinds = {kind.get("type") for kind in [schema, *schema.get("anyOf", [])]}
    for kind, value in (("integer", 1), ("boolean", True), ("string", "x"), ("array", [])):
        if kind in kinds:
            return value
    return None


@pytest.mark.django_db(transaction=True)
def test_every_mcp_tool_refuses_a_nul_in_its_text_naming_the_argument_or_drops_it_from_a_search(
    alice,
):
    """Every tool on the server, the ones other apps register included: none may skip
    ``tool_errors``."""
    from mcp.server.mcpserver.exceptions import ToolError

    from surfaces.mcp_server import build_server

    server = build_server(Memory.objects.default(), alice)
    seen: dict[tuple[str, str], str] = {}

    async def call_every_tool() -> None:
        for tool in await server.list_tools():
            schema = tool.input_schema
            required = {
                name: _plain(schema["properties"][name]) for name in schema.get("required", [])
            }
            for name, argument in schema["properties"].items():
                value = _example(argument, "The gate\x00code")
                if value is None:
                    continue
                try:
                    await server.call_tool(tool.name, {**required, name: value})
                    seen[tool.name, name] = "answered"
                except ToolError as refused:
                    seen[tool.name, name] = str(refused)

    run_async(call_every_tool)

    assert ("memory_write", "content") in seen
    for (tool, name), outcome in seen.items():
        if name in inputs.SEARCH_WORDS:
            assert "unexpected" not in outcome and "NUL" not in outcome, (tool, outcome)
        else:
            assert f"“{name}” contains a NUL" in outcome, (tool, outcome)
    assert not Fact.objects.exists()


# The terminal ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("verb", [["memory", "add"], ["agent", "encode"]])
def test_a_word_that_is_not_utf8_is_refused_at_the_terminal_in_one_line(verb):
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}

    done = subprocess.run(
        [sys.executable, "manage.py", *verb, b"The gate \xff code"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=settings.BASE_DIR,
    )

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is not valid UTF-8 text" in done.stderr
    assert not Fact.objects.exists()
