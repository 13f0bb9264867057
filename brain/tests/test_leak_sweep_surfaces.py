"""No other surface shows a person a canary they may not read: Read as across memories, the
admin as staff limited to Sales, every MCP tool, every CLI verb with ``--as``, and what a
loopback Home Assistant is told (``brain/tests/leak_sweep.py`` has what the sweeps share)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import reverse

from brain.testing import run_async
from brain.tests import privacy_world
from brain.tests.leak_sweep import QUESTIONS, answer_text, asked_ids, described, leaks, walk
from review.tests.test_timeline_push import home_assistant  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    return privacy_world.build()


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
    walk(world, person, client, found, across=True)
    assert not found, described(found)


# The admin --------------------------------------------------------------------------------------


def _admin_paths() -> list[str]:
    """The admin's index, each model's list, and the change, history and delete pages of every
    row of every registered model that holds a canary or points at one, and of its first rows
    (the admin is skipped by ``endpoints``)."""
    paths = [reverse("admin:index")]
    near = set(asked_ids())
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
        for canary in leaks(world, person, answer_text(response)):
            found[(person, canary)].append(f"GET {path}")
    assert asked > 100
    assert not found, described(found)


# MCP tools --------------------------------------------------------------------------------------


def _run_tools(server, calls) -> list[str]:

    answers = []

    async def every():
        for name, arguments in calls:
            try:
                result = await server.call_tool(name, arguments)
                answers.append(f"{name}: {result}")
            except Exception as error:
                answers.append(f"{name} refused: {error}")

    run_async(every)
    return answers


def _tool_calls(server, ids) -> list[tuple[str, dict]]:
    """Each tool with arguments that would bring the canaries back: the question for text,
    every id for an id, and the schema's own defaults for the rest."""
    calls = []
    tools = run_async(server.list_tools)
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
    from surfaces import mcp_server

    world = privacy_world.build()
    found: dict = defaultdict(list)
    ids = asked_ids()
    for person in ("sales", "hr", "norole", "tom"):
        for memory in (world.team, world.home, world.other):
            server = mcp_server.build_server(memory, world.people[person])
            answers = _run_tools(server, _tool_calls(server, ids))
            assert not any("no longer exists" in answer for answer in answers)
            for answer in answers:
                for canary in leaks(world, person, answer):
                    found[(person, canary)].append(f"{memory.slug}: {answer[:200]}")
    assert not found, described(found)


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
    calls = _cli_calls(asked_ids())
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
            for canary in leaks(world, person, out.getvalue() + err.getvalue()):
                found[(person, canary)].append(
                    f"brain {name} {' '.join(rest)[:60]} ({memory.slug})"
                )
    assert not found, described(found)


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
