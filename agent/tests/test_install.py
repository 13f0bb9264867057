"""`brain agent install` and `uninstall` in a real shell, into a temporary home or project:
Claude Code's own files, appended to and never clobbered, and an installed hook that works."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from rest_framework.authtoken.models import Token

from agent.tests.test_hooks import payload
from brain.testing import database_url
from knowledge.models import Memory
from memory import actions
from memory.models import Origin
from memory.taught import Statement

BASE = Path(django_settings.BASE_DIR).resolve()
WRAPPER = BASE / "bin" / "brain"
HOOKS_SCRIPT = BASE / "agent" / "hooks.py"

pytestmark = pytest.mark.django_db(transaction=True)


def group(command: str, **fields) -> dict:
    """One entry of a hook array, as Claude Code's settings.json holds it."""
    return {**fields, "hooks": [{"type": "command", "command": command}]}


THEIR_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "SessionStart": [group("/opt/x/greet.sh", matcher="startup")],
        "PreToolUse": [group("/opt/x/guard.sh", matcher="Bash")],
    },
}
THEIR_STATE = {
    "numStartups": 41,
    "projects": {"/home/sam/notes": {"allowedTools": []}},
    "mcpServers": {"search": {"type": "stdio", "command": "/opt/x/search-mcp", "args": []}},
}


@pytest.fixture
def operator(django_user_model):
    """The admin account `make run` makes, whose token install uses unless told otherwise."""
    return django_user_model.objects.create_superuser(
        username=django_settings.BRAIN_ADMIN_USERNAME, password="x"
    )


@pytest.fixture
def home(tmp_path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def brain(*args: str, home: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_", "CLAUDE_"))}
    env.update(
        HOME=str(home),
        DATABASE_URL=database_url(connection.settings_dict),
        BRAIN_EMBEDDER="hash",
        **(extra_env or {}),
    )
    return subprocess.run(
        [str(WRAPPER), "agent", *args], env=env, capture_output=True, text=True, timeout=120
    )


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def commands(settings: dict, event: str) -> list[str]:
    return [
        hook["command"] for group in settings["hooks"][event] for hook in group.get("hooks", [])
    ]


def seed_home(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(THEIR_SETTINGS, indent=2))
    (home / ".claude.json").write_text(json.dumps(THEIR_STATE))


# Into the user's Claude Code settings ---------------------------------------------------------


def test_install_into_a_home_appends_absolute_hooks_and_keeps_everything_already_there(
    operator, home
):
    seed_home(home)

    ran = brain("install", home=home)

    assert ran.returncode == 0, ran.stderr
    settings, state = read(home / ".claude" / "settings.json"), read(home / ".claude.json")
    user_file = home / ".claude" / "brain" / "user.json"
    python = os.path.abspath(sys.executable)
    start = f"{python} -I -S {HOOKS_SCRIPT} session-start --config {user_file}"
    end = start.replace("session-start", "session-end")
    assert commands(settings, "SessionStart") == ["/opt/x/greet.sh", start]
    assert commands(settings, "SessionEnd") == [end]
    assert settings["hooks"]["PreToolUse"] == THEIR_SETTINGS["hooks"]["PreToolUse"]
    assert (settings["model"], settings["permissions"]) == ("opus", THEIR_SETTINGS["permissions"])
    assert "$HOME" not in json.dumps(settings) and "~" not in json.dumps(settings)
    assert state["mcpServers"] == {
        **THEIR_STATE["mcpServers"],
        "brain": {"type": "stdio", "command": str(WRAPPER), "args": ["mcp", "--user", "admin"]},
    }
    assert (state["numStartups"], state["projects"]) == (41, THEIR_STATE["projects"])
    assert read(user_file)["token"] == Token.objects.get(user=operator).key
    assert stat.S_IMODE(user_file.stat().st_mode) == 0o600
    assert f"Added the SessionStart hook to {home}/.claude/settings.json: {start}" in ran.stdout
    assert f"Added the SessionEnd hook to {home}/.claude/settings.json: {end}" in ran.stdout
    assert f'Added the MCP server "brain" in {home}/.claude.json' in ran.stdout
    assert f"Wrote {user_file}: server http://127.0.0.1:8000" in ran.stdout


def test_installing_twice_changes_nothing_the_second_time(operator, home):
    seed_home(home)
    first = brain("install", home=home)
    files = [home / ".claude" / "settings.json", home / ".claude.json"]
    after_first = [path.read_bytes() for path in files]

    second = brain("install", home=home)

    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert [path.read_bytes() for path in files] == after_first
    assert "Added" not in second.stdout and "Wrote" not in second.stdout
    assert second.stdout.count("Already there:") == 4
    assert Token.objects.filter(user=operator).count() == 1


def test_a_hook_left_by_a_moved_checkout_is_updated_in_place_not_added_twice(operator, home):
    seed_home(home)
    settings_file = home / ".claude" / "settings.json"
    old = "/old/brain/.venv/bin/python -I -S /old/brain/agent/hooks.py session-start --config /x"
    stale = {**THEIR_SETTINGS, "hooks": {"SessionStart": [group(old)]}}
    settings_file.write_text(json.dumps(stale))

    ran = brain("install", home=home)

    assert ran.returncode == 0, ran.stderr
    starts = commands(read(settings_file), "SessionStart")
    assert len(starts) == 1 and starts[0].endswith(
        f"{HOOKS_SCRIPT} session-start --config {home}/.claude/brain/user.json"
    )
    assert "Updated the SessionStart hook" in ran.stdout


def test_claude_config_dir_is_where_a_relocated_claude_code_reads_its_settings(operator, home):
    config = home / "elsewhere"

    ran = brain("install", home=home, extra_env={"CLAUDE_CONFIG_DIR": str(config)})

    assert ran.returncode == 0, ran.stderr
    assert commands(read(config / "settings.json"), "SessionStart")[0].endswith(
        f"--config {config}/brain/user.json"
    )
    assert "brain" in read(config / ".claude.json")["mcpServers"]
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()


def test_uninstall_takes_out_exactly_what_install_added(operator, home):
    seed_home(home)
    settings_file, state_file = home / ".claude" / "settings.json", home / ".claude.json"
    assert brain("install", home=home).returncode == 0
    # Claude Code and the person keep changing their files in between.
    changed = read(settings_file)
    changed["hooks"]["SessionEnd"].append(group("/opt/x/bye.sh"))
    settings_file.write_text(json.dumps(changed))
    state = read(state_file)
    state["numStartups"] = 42
    state_file.write_text(json.dumps(state))

    ran = brain("uninstall", home=home)

    assert ran.returncode == 0, ran.stderr
    assert read(settings_file) == {
        **THEIR_SETTINGS,
        "hooks": {
            **THEIR_SETTINGS["hooks"],
            "SessionEnd": [group("/opt/x/bye.sh")],
        },
    }
    assert read(state_file) == {**THEIR_STATE, "numStartups": 42}
    assert not (home / ".claude" / "brain").exists()
    assert "Removed the SessionStart hook from" in ran.stdout
    assert 'Removed the MCP server "brain" from' in ran.stdout
    again = brain("uninstall", home=home)
    assert again.returncode == 0 and "Removed" not in again.stdout


def test_uninstall_from_an_empty_home_leaves_it_empty(operator, home):
    assert brain("install", home=home).returncode == 0
    assert brain("uninstall", home=home).returncode == 0

    assert sorted(p.name for p in home.rglob("*") if p.is_file()) == []


def test_a_settings_file_that_is_not_json_is_refused_and_nothing_is_written(operator, home):
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"model": "opus",')

    ran = brain("install", home=home)

    assert ran.returncode != 0
    assert ran.stderr.splitlines() == [
        f"CommandError: {home}/.claude/settings.json is not valid JSON (line 1): fix it first; "
        "nothing was changed."
    ]
    assert sorted(p.name for p in home.rglob("*")) == [".claude", "settings.json"]


def test_an_mcp_server_called_brain_that_is_not_brains_is_left_alone(operator, home):
    theirs = {"mcpServers": {"brain": {"command": "/opt/other/brain-server", "args": []}}}
    (home / ".claude.json").write_text(json.dumps(theirs))

    ran = brain("install", home=home)

    assert ran.returncode != 0
    assert 'already has an MCP server called "brain" that is not brain\'s' in ran.stderr
    assert read(home / ".claude.json") == theirs
    assert not (home / ".claude").exists()


# Into a project, and the hook it wrote ---------------------------------------------------------


def test_install_into_a_project_keeps_the_token_out_of_the_project(operator, home, tmp_path):
    project = tmp_path / "billing-service"
    project.mkdir()

    ran = brain("install", "--project", str(project), home=home)

    assert ran.returncode == 0, ran.stderr
    token = Token.objects.get(user=operator).key
    settings = read(project / ".claude" / "settings.json")
    assert commands(settings, "SessionStart")[0].startswith(f"{os.path.abspath(sys.executable)} ")
    assert read(project / ".mcp.json")["mcpServers"]["brain"]["command"] == str(WRAPPER)
    assert all(token not in path.read_text() for path in project.rglob("*") if path.is_file())
    connection_file = commands(settings, "SessionStart")[0].rsplit(" ", 1)[1]
    assert connection_file.startswith(f"{home}/.claude/brain/project-")
    assert read(Path(connection_file))["token"] == token


def test_an_unknown_project_folder_or_memory_is_refused_in_one_line(operator, home, tmp_path):
    no_folder = brain("install", "--project", str(tmp_path / "nowhere"), home=home)
    no_memory = brain("--memory", "nope", "install", home=home)

    assert no_folder.stderr.splitlines() == [
        f"CommandError: {tmp_path}/nowhere is not a folder: --project names the project's folder."
    ]
    assert no_memory.stderr.splitlines() == ["CommandError: There is no memory called 'nope'."]
    assert not any(home.iterdir())


def test_the_installed_session_start_hook_prints_the_block_from_a_live_server(
    operator, home, tmp_path, live_server
):
    """End to end: install into a project, then run the SessionStart command exactly as it is
    written in settings.json, through a shell, with Claude Code's payload on stdin."""
    memory = Memory.objects.default()
    fact = actions.learn(
        Statement.typed(
            memory=memory, text="The billing service deploys on Fridays", origin=Origin.TERMINAL
        )
    ).fact
    project = tmp_path / "billing-service"
    project.mkdir()
    installed = brain("--server", live_server.url, "install", "--project", str(project), home=home)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.splitlines()[-1].startswith(f"brain at {live_server.url} answers")
    [command] = commands(read(project / ".claude" / "settings.json"), "SessionStart")

    ran = subprocess.run(
        command,
        shell=True,
        cwd=project,
        input=payload(cwd=str(project)),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )

    assert (ran.returncode, ran.stderr) == (0, "")
    assert f"- [{fact.pk}] The billing service deploys on Fridays" in ran.stdout
