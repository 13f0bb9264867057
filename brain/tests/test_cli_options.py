"""`--memory` and `--as` anywhere on the line, for every group of commands, and `brain --help`
listing every group in one line each (brain/cli.py, manage.py).

Seen before: `brain memory list --memory garden` → "unrecognized arguments", `brain --memory
garden memory list` → "Unknown command: '--memory'"; only `brain memory --memory garden list`
worked."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command, find_commands, load_command_class
from django.db import connection

from brain import cli
from brain.testing import database_url

BRAIN = Path(settings.BASE_DIR) / "bin" / "brain"

# Every group, with a line that reaches its verb (the parser is asked, nothing runs).
GROUPS = {
    "memory": ["list"],
    "memories": ["list"],
    "learn": ["energy"],
    "sources": ["search", "boiler"],
    "entities": ["list"],
    "agent": ["stats"],
    "worker-token": ["list"],
    "mcp": [],
    "reembed": [],
    "indexes": [],
    "demo": [],
}


def _groups() -> set[str]:
    found = set()
    for label in cli.OUR_APPS:
        config = apps.get_app_config(label)
        found |= set(find_commands(f"{config.path}/management"))
    return found


def test_every_group_is_listed_here():
    """A new group is held to the same rule; bench and ensure_admin are `make` targets' own."""
    assert _groups() - {"bench", "ensure_admin"} == set(GROUPS)


def _parsed(group: str, words: list[str]) -> tuple[str, str]:
    command = load_command_class(_app_of(group), group)
    options = command.create_parser("brain", group).parse_args(words)
    return options.memory, options.person


def _app_of(group: str) -> str:
    for label in cli.OUR_APPS:
        config = apps.get_app_config(label)
        if group in find_commands(f"{config.path}/management"):
            return config.name
    raise LookupError(group)


@pytest.mark.parametrize("group", GROUPS)
def test_memory_and_as_are_taken_anywhere_on_the_line(group):
    verb = GROUPS[group]
    placements = [
        ["--memory", "garden", "--as", "sam", *verb],  # before the verb
        [*verb, "--memory", "garden", "--as", "sam"],  # after it
        [*verb[:1], "--memory=garden", *verb[1:], "--as=sam"],  # between its words
    ]

    assert {_parsed(group, words) for words in placements} == {("garden", "sam")}


@pytest.mark.parametrize(
    ("typed", "run"),
    [
        (["brain", "--memory", "garden", "memory", "list"], ["memory", "--memory", "garden"]),
        (["brain", "--as=sam", "--memory", "g", "memory", "add", "x"], ["memory", "--as=sam"]),
        (["brain", "memory", "list", "--memory", "garden"], ["memory", "list", "--memory"]),
    ],
)
def test_options_typed_before_the_group_move_behind_its_name(typed, run):
    assert cli.command_first(typed)[1 : 1 + len(run)] == run


def test_after_a_double_dash_the_words_are_the_verbs_own():
    command = load_command_class("surfaces", "memory")
    options = command.create_parser("brain", "memory").parse_args(
        ["add", "--memory", "garden", "--", "--as is a flag"]
    )

    assert (options.memory, options.person, options.text) == ("garden", "", "--as is a flag")


@pytest.mark.parametrize("group", [group for group, verb in GROUPS.items() if verb])
def test_each_verbs_help_lists_them(group, capsys):
    command = load_command_class(_app_of(group), group)
    with pytest.raises(SystemExit):
        command.create_parser("brain", group).parse_args([GROUPS[group][0], "--help"])

    shown = capsys.readouterr().out
    assert "--memory SLUG" in shown and "--as NAME" in shown


@pytest.mark.django_db
def test_call_command_takes_them_after_the_verb_too(home):
    from knowledge.models import Memory

    Memory.objects.create(slug="garden", name="Garden")
    out = io.StringIO()

    call_command("memories", "list", "--memory", "garden", stdout=out)

    assert out.getvalue() == "garden  Garden  0 facts\n"


def _brain(*words: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}
    return subprocess.run(
        [str(BRAIN), *words], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.django_db(transaction=True)
def test_the_three_placements_list_the_same_memory_from_the_terminal():
    from knowledge.models import Memory
    from memory import document, revisions
    from memory.models import DocumentRevision

    Memory.objects.default()
    garden = Memory.objects.create(slug="garden", name="Garden")
    roses = "- The roses want water on Fridays."
    revisions.save_user_edit(
        memory=garden,
        text=f"{document.TEMPLATE}{roses}\n",
        base_generation=DocumentRevision.objects.current(garden).generation,
        by=None,
    )

    answers = [
        _brain("memory", "list", "--memory", "garden"),
        _brain("--memory", "garden", "memory", "list"),
        _brain("memory", "--memory", "garden", "list"),
    ]

    assert [answer.returncode for answer in answers] == [0, 0, 0], answers
    assert len({answer.stdout for answer in answers}) == 1
    assert roses in answers[0].stdout


def test_brain_help_lists_every_group_in_one_line_each():
    answer = _brain("--help")

    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    listed = {line.split()[0] for line in lines if line.startswith("  ")}
    assert listed >= set(GROUPS) | {"worker"}
    assert all(len(line) <= 100 for line in lines), [x for x in lines if len(x) > 100]
    assert "--memory SLUG" in answer.stdout and "--as NAME" in answer.stdout
