"""Nobody reads what they may not, on any surface: a generated sweep.

``privacy_world`` builds memories where some people may not read some texts, each such text
carrying a canary word. Every URL the resolver knows is requested as each person (pages and
their htmx partials, the API, the admin, exports), with every id of the world in its path and
every memory in its address; every MCP tool and every read verb of the CLI is called as each
person; and what is pushed to a loopback Home Assistant is read. No answer (body, headers) may
hold a canary its reader may not read. A URL added later is walked without editing this file.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import reverse

from brain.tests import endpoints, privacy_world
from review.tests.test_timeline_push import home_assistant  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

# What a person would ask to find the canaries, in words of the texts that carry them (never
# a canary itself: an answer may repeat the question).
QUESTIONS = privacy_world.QUESTION
POST_BODIES = {
    "knowledge-api:context": {"question": QUESTIONS, "token_budget": 2000},
    "learning-api:ask": {"question": QUESTIONS},
    "agent-api:retrieve": {"query": QUESTIONS, "k": 20},
    "memory:ask": {"question": QUESTIONS},
}


@pytest.fixture
def world(db):
    return privacy_world.build()


def _leaks(world, person: str, text: str) -> set[str]:
    low = text.casefold()
    return {canary for canary in world.forbidden(person) if canary in low}


def _answer_text(response) -> str:
    body = b"".join(response) if getattr(response, "streaming", False) else response.content
    headers = "\n".join(f"{k}: {v}" for k, v in response.items())
    return headers + "\n" + body.decode("utf-8", "replace")


def _rows_with_canaries() -> dict:
    """Every row of the apps' models whose own fields hold a canary, by model."""
    found: dict = defaultdict(set)
    for model in _models():
        fields = [f.attname for f in model._meta.concrete_fields]
        for row in model._base_manager.values("pk", *fields):
            text = json.dumps(row, default=str).casefold()
            if any(canary in text for canary in privacy_world.CANARIES):
                found[model].add(row["pk"])
    return found


def _models():
    return [
        model
        for model in apps.get_models()
        if model._meta.app_label in ("brain", "knowledge", "memory", "review", "agent")
    ]


def _ids() -> list[int]:
    """The ids a path's ``<int:pk>`` is tried with: every row that holds a canary, and the pages
    of facts that do (a page's own row holds none) — each number tried on every path, so rows of
    other kinds, other memories and rows a person may not read are all asked for."""
    from knowledge.models import Subject

    rows = _rows_with_canaries()
    ids = {pk for pks in rows.values() for pk in pks}
    facts = next((pks for model, pks in rows.items() if model.__name__ == "Fact"), set())
    pages = Subject.objects.as_system("the sweep's pages").filter(facts__in=facts)
    ids.update(pages.values_list("pk", flat=True))
    return sorted(ids)


def _memories_of(pk: int, world, *, across: bool) -> set[str]:
    """The slugs of the memories whose rows have id ``pk`` (of any model), and with ``across``
    ``other`` too: an id is asked for in its own memory, and across memories where reading
    there could open another's (Read as)."""
    slugs = {world.other.slug} if across else set()
    for model in _models():
        if any(f.name == "memory" for f in model._meta.concrete_fields):
            rows = model._base_manager.filter(pk=pk).values_list("memory__slug", flat=True)
            slugs.update(rows)
    return slugs


def _walk(world, person: str, client: Client, found: dict, *, across=False, ids=True) -> int:
    """Every URL as ``person``; with ``ids``, the paths that name a row with each of ``_ids``
    (else only those that name none), in each id's own memory (``across``: and in ``other``)."""
    requests = 0
    ids = _ids() if ids else []
    every = [world.team.slug, world.home.slug, world.other.slug]
    asked_in = {pk: _memories_of(pk, world, across=across) for pk in ids}
    for route in endpoints.routes():
        if route.name in ("logout", "login"):
            continue
        fills = [{}] if not route.params else [dict.fromkeys(route.params, pk) for pk in ids]
        if not fills:
            continue
        gets = "get" in route.methods
        for values in fills:
            path = route.url(**values)
            slugs = every if not values else sorted(asked_in[next(iter(values.values()))])
            for slug in slugs:
                # A partial of an object's view answers as its page does: its htmx form is
                # asked for on the paths without an id.
                for htmx in (False, True) if not values else (False,):
                    headers = {"HX-Request": "true"} if htmx else {}
                    if gets:
                        response = client.get(path, {"memory": slug}, headers=headers)
                        requests += 1
                        if response.status_code == 405:  # a view that only takes a POST
                            gets = False
                        for canary in _leaks(world, person, _answer_text(response)):
                            found[(person, canary)].append(f"GET {path}?memory={slug} htmx={htmx}")
                    body = POST_BODIES.get(route.name)
                    if body is not None and not htmx:
                        url = f"{path}?memory={slug}"
                        if route.api:
                            response = client.post(url, body, content_type="application/json")
                        else:
                            response = client.post(url, body)
                        requests += 1
                        for canary in _leaks(world, person, _answer_text(response)):
                            found[(person, canary)].append(f"POST {url}")
    return requests


# Every path with every id as the people whose rights differ in what they read; every path that
# names no row as everyone else (the same views, asked for the same rows, as people whose rights
# differ in what they do: the Sales staff member and curator, the administrator of another memory).
WALKED_WITH_IDS = ("sales", "hr", "norole", "tom", "sarah")


@pytest.mark.parametrize("person", sorted(privacy_world.ALLOWED))
def test_no_page_or_api_answer_shows_a_person_a_canary_they_may_not_read(world, person):
    client = Client()
    client.force_login(world.people[person])
    found: dict = defaultdict(list)
    requests = _walk(world, person, client, found, ids=person in WALKED_WITH_IDS)
    assert requests > 100
    assert not found, _described(found)


# Read as ----------------------------------------------------------------------------------------


def test_reading_as_someone_in_a_memory_one_administers_shows_nothing_of_another_memory(world):
    """otheradmin administers ``other`` and reads ``team`` with no role: reading ``other`` as
    the superuser must not open ``team``'s rows through ``other``'s addresses."""
    person = "otheradmin"
    client = Client()
    client.force_login(world.people[person])
    chosen = client.post(
        f"{reverse('knowledge:read-as')}?memory={world.other.slug}",
        {"person": world.superuser.username},
    )
    assert chosen.status_code in (200, 302)
    found: dict = defaultdict(list)
    _walk(world, person, client, found, across=True)
    assert not found, _described(found)


def _described(found: dict) -> str:
    return "\n".join(
        f"{who} read {canary} at {len(where)} places, e.g. {where[:5]}"
        for (who, canary), where in found.items()
    )


# The admin --------------------------------------------------------------------------------------


def _admin_paths() -> list[str]:
    """The admin's index, each model's list, and the change, history and delete pages of every
    row of every registered model that holds a canary or points at one, and of its first rows
    (the admin is skipped by ``endpoints``)."""
    paths = [reverse("admin:index")]
    near = set(_ids())
    for model in admin.site._registry:
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        paths.append(reverse(f"{name}_changelist"))
        every = list(model._base_manager.order_by("pk").values_list("pk", flat=True)[:300])
        for pk in [pk for pk in every if pk in near] or every[:3]:
            for view in ("change", "history", "delete"):
                paths.append(reverse(f"{name}_{view}", args=[pk]))
    return paths


def test_the_admin_shows_staff_who_are_not_superusers_nothing_they_may_not_read(world):
    person = "staffsales"
    client = Client()
    client.force_login(world.people[person])
    found: dict = defaultdict(list)
    asked = 0
    for path in _admin_paths():
        response = client.get(path)
        asked += 1
        for canary in _leaks(world, person, _answer_text(response)):
            found[(person, canary)].append(f"GET {path}")
    assert asked > 100
    assert not found, _described(found)


# MCP tools --------------------------------------------------------------------------------------


def _run_tools(server, calls) -> list[str]:
    import anyio

    answers = []

    async def every():
        for name, arguments in calls:
            try:
                result = await server.call_tool(name, arguments)
                answers.append(f"{name}: {result}")
            except Exception as error:
                answers.append(f"{name} refused: {error}")

    anyio.run(every)
    return answers


def _tool_calls(server, ids) -> list[tuple[str, dict]]:
    """Each tool with arguments that would bring the canaries back: the question for text,
    every id for an id, and the schema's own defaults for the rest."""
    import anyio

    calls = []
    tools = anyio.run(server.list_tools)
    for tool in tools:
        schema = tool.input_schema or {}
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        numbers = [n for n in required if properties.get(n, {}).get("type") == "integer"]
        texts = [n for n in required if properties.get(n, {}).get("type") == "string"]
        lists = [n for n in required if properties.get(n, {}).get("type") == "array"]
        base = {n: False for n in required if n not in numbers + texts + lists}
        base |= {n: [] for n in lists} | {n: QUESTIONS for n in texts}
        if numbers:
            calls += [(tool.name, base | dict.fromkeys(numbers, pk)) for pk in ids]
        else:
            calls.append((tool.name, base))
    return calls


@pytest.mark.django_db(transaction=True)  # the tools read on the ORM's thread, as served
def test_no_mcp_tool_answers_a_person_with_a_canary_they_may_not_read():
    from memory import mcp_server

    world = privacy_world.build()
    found: dict = defaultdict(list)
    ids = _ids()
    for person in ("sales", "hr", "norole", "tom"):
        for memory in (world.team, world.home, world.other):
            server = mcp_server.build_server(memory, world.people[person])
            answers = _run_tools(server, _tool_calls(server, ids))
            assert not any("no longer exists" in answer for answer in answers)
            for answer in answers:
                for canary in _leaks(world, person, answer):
                    found[(person, canary)].append(f"{memory.slug}: {answer[:200]}")
    assert not found, _described(found)


# The CLI ----------------------------------------------------------------------------------------


def _cli_calls(ids) -> list[list[str]]:
    """Every verb of every command that acts as a person (``--as``), with a question or every
    id where it takes one."""
    from django.core.management import get_commands, load_command_class

    calls = []
    for name, app in get_commands().items():
        if app not in ("knowledge", "memory", "review", "agent", "brain"):
            continue
        command = load_command_class(app, name)
        parser = command.create_parser("manage.py", name)
        if not any("--as" in action.option_strings for action in parser._actions):
            continue
        subparsers = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        verbs = subparsers[0].choices if subparsers else {"": parser}
        for verb, verb_parser in verbs.items():
            if verb in ("install", "uninstall", "edit", "import", "export", "add"):
                continue  # files, editors and the user's settings: no memory to read there
            positional = [
                a for a in verb_parser._actions if not a.option_strings and a.dest != "help"
            ]
            numeric = [a for a in positional if a.type is int]
            base = [name, *([verb] if verb else [])]
            if numeric:
                for pk in ids:
                    calls.append([*base, *[str(pk) for _ in positional]])
            else:
                calls.append([*base, *[QUESTIONS for a in positional if a.nargs != "?"]])
    return calls


@pytest.mark.parametrize("person", ["sales", "hr", "norole", "tom"])
def test_no_cli_verb_run_as_a_person_prints_a_canary_they_may_not_read(world, person):
    import io

    from django.core.management import call_command

    found: dict = defaultdict(list)
    calls = _cli_calls(_ids())
    assert calls
    for memory in (world.team, world.home):
        for name, *rest in calls:
            out, err = io.StringIO(), io.StringIO()
            with transaction.atomic():
                try:
                    call_command(
                        name, "--memory", memory.slug, "--as", person, *rest, stdout=out, stderr=err
                    )
                except BaseException as error:
                    err.write(str(error))
                transaction.set_rollback(True)
            for canary in _leaks(world, person, out.getvalue() + err.getvalue()):
                found[(person, canary)].append(
                    f"brain {name} {' '.join(rest)[:60]} ({memory.slug})"
                )
    assert not found, _described(found)


# Home Assistant: what every member of a memory may read, and nothing else ---------------------


def test_home_assistant_is_told_only_what_every_member_of_the_memory_may_read(world, request):
    """Every event of the timeline pushed to a loopback Home Assistant, with the sensors: in
    these memories no canary is read by every member, so none may reach it."""
    from review import timeline
    from review.models import Event

    events = list(Event.objects.as_system("each event a push would send").all())
    assert len(events) > 5
    stub = request.getfixturevalue("home_assistant")
    for event in events:
        timeline.push(event)
    told = json.dumps(stub.received, default=str).casefold()
    assert stub.received
    assert [canary for canary in privacy_world.CANARIES if canary in told] == []
