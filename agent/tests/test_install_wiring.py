"""`brain agent install` points the hooks at the brain that runs, in the memory asked for, with
Claude Code's own auto memory off, and `uninstall` takes out exactly what install made.

Seen before: with the app on BRAIN_PORT=8200 install wrote http://127.0.0.1:8000 and the
SessionStart hook printed nothing; it took no --memory, so a coding project got the household's
facts; it left Claude Code's auto memory on (seed 000: one memory, all of it readable);
uninstall left an empty .claude/; --help did not describe --project."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent.tests.test_hooks import payload
from agent.tests.test_install import brain, commands, operator, read  # noqa: F401  (fixture)
from knowledge.models import Memory
from memory import actions
from memory.models import Origin
from memory.taught import Statement

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def home(tmp_path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "billing-service"
    folder.mkdir()
    return folder


def _connection(project: Path) -> dict:
    [command] = commands(read(project / ".claude" / "settings.json"), "SessionStart")
    return read(Path(command.rsplit(" ", 1)[1]))


def _session_start(project: Path, home: Path) -> subprocess.CompletedProcess:
    [command] = commands(read(project / ".claude" / "settings.json"), "SessionStart")
    return subprocess.run(
        command,
        shell=True,
        cwd=project,
        input=payload(cwd=str(project)),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )


# Which server ---------------------------------------------------------------------------------


def test_the_hooks_ask_the_port_brain_is_on(operator, home, project):  # noqa: F811
    ran = brain("install", "--project", str(project), home=home, extra_env={"BRAIN_PORT": "8200"})

    assert ran.returncode == 0, ran.stderr
    assert _connection(project)["url"] == "http://127.0.0.1:8200"


def test_the_hooks_ask_the_running_make_run_when_nothing_names_a_server(
    operator,  # noqa: F811
    home,
    project,
    tmp_path,
):
    var = tmp_path / "var"
    var.mkdir()
    (var / "serving.json").write_text(
        json.dumps({"url": "http://127.0.0.1:8311", "pid": os.getpid()})
    )

    ran = brain(
        "install", "--project", str(project), home=home, extra_env={"BRAIN_VAR_DIR": str(var)}
    )

    assert ran.returncode == 0, ran.stderr
    assert _connection(project)["url"] == "http://127.0.0.1:8311"
    assert "the running make run" in ran.stdout


def test_a_server_that_stopped_is_not_asked(operator, home, project, tmp_path):  # noqa: F811
    var = tmp_path / "var"
    var.mkdir()
    no_such_process = 2**22 + 1  # above Linux's largest pid
    served = {"url": "http://127.0.0.1:8311", "pid": no_such_process}
    (var / "serving.json").write_text(json.dumps(served))

    ran = brain(
        "install", "--project", str(project), home=home, extra_env={"BRAIN_VAR_DIR": str(var)}
    )

    assert ran.returncode == 0, ran.stderr
    assert _connection(project)["url"] == "http://127.0.0.1:8000"


def test_the_installed_hook_prints_the_block_of_the_memory_asked_for_from_brain_on_its_port(
    operator,  # noqa: F811
    home,
    project,
    live_server,
):
    household = Memory.objects.default()
    code = Memory.objects.create(slug="code", name="Billing code")
    actions.learn(
        Statement.typed(
            memory=household, text="The boiler is serviced in May", origin=Origin.TERMINAL
        )
    )
    fact = actions.learn(
        Statement.typed(
            memory=code, text="The billing service deploys on Fridays", origin=Origin.TERMINAL
        )
    ).fact
    port = live_server.url.rsplit(":", 1)[1]

    installed = brain(
        "install",
        "--project",
        str(project),
        "--memory",
        "code",
        home=home,
        extra_env={"BRAIN_PORT": port},
    )
    assert installed.returncode == 0, installed.stderr
    ran = _session_start(project, home)

    assert (ran.returncode, ran.stderr) == (0, "")
    assert f"- [{fact.pk}] The billing service deploys on Fridays" in ran.stdout
    assert "boiler" not in ran.stdout
    mcp = read(project / ".mcp.json")["mcpServers"]["brain"]
    assert mcp["args"][:3] == ["mcp", "--memory", "code"]


def test_a_person_who_may_not_read_the_memory_is_refused_before_anything_is_written(
    operator,  # noqa: F811
    home,
    project,
    django_user_model,
):
    from knowledge.models import Membership, Permission

    code = Memory.objects.create(slug="code", name="Billing code")
    sam = django_user_model.objects.create_user(username="sam", password="x")
    Membership.objects.create(user=sam, memory=code, permission=Permission.NONE)

    ran = brain(
        "install", "--project", str(project), "--memory", "code", "--user", "sam", home=home
    )

    assert ran.returncode != 0
    assert "sam may not read Billing code" in ran.stderr
    assert list(project.iterdir()) == [] and not any(home.iterdir())


# Claude Code's own auto memory ----------------------------------------------------------------


@pytest.mark.parametrize("before", ["absent", True, False])
def test_install_turns_auto_memory_off_and_uninstall_puts_back_what_was_there(
    operator,  # noqa: F811
    home,
    project,
    before,
):
    theirs = {"model": "opus"} | ({} if before == "absent" else {"autoMemoryEnabled": before})
    (project / ".claude").mkdir()
    settings_file = project / ".claude" / "settings.json"
    settings_file.write_text(json.dumps(theirs))

    installed = brain("install", "--project", str(project), home=home)

    assert installed.returncode == 0, installed.stderr
    assert read(settings_file)["autoMemoryEnabled"] is False
    if before is not False:
        assert "auto memory off" in installed.stdout

    removed = brain("uninstall", "--project", str(project), home=home)

    assert removed.returncode == 0, removed.stderr
    assert read(settings_file) == theirs


def test_a_choice_made_after_install_is_kept_on_uninstall(operator, home, project):  # noqa: F811
    assert brain("install", "--project", str(project), home=home).returncode == 0
    settings_file = project / ".claude" / "settings.json"
    changed = read(settings_file) | {"autoMemoryEnabled": True, "model": "opus"}
    settings_file.write_text(json.dumps(changed))

    assert brain("uninstall", "--project", str(project), home=home).returncode == 0

    assert read(settings_file) == {"autoMemoryEnabled": True, "model": "opus"}


# What uninstall leaves -------------------------------------------------------------------------


def test_uninstall_leaves_a_project_and_a_home_as_they_were_folders_included(
    operator,  # noqa: F811
    home,
    project,
):
    assert brain("install", "--project", str(project), home=home).returncode == 0
    assert brain("install", home=home).returncode == 0
    assert (project / ".claude").is_dir() and (home / ".claude").is_dir()

    assert brain("uninstall", "--project", str(project), home=home).returncode == 0
    assert brain("uninstall", home=home).returncode == 0

    assert list(project.iterdir()) == []
    assert list(home.iterdir()) == []


def test_a_folder_that_holds_something_else_stays(operator, home, project):  # noqa: F811
    assert brain("install", "--project", str(project), home=home).returncode == 0
    (project / ".claude" / "commands").mkdir()

    assert brain("uninstall", "--project", str(project), home=home).returncode == 0

    assert sorted(p.name for p in project.rglob("*")) == [".claude", "commands"]


# --help ------------------------------------------------------------------------------------------


def test_install_help_describes_every_option(home):
    ran = brain("install", "--help", home=home)

    assert ran.returncode == 0, ran.stderr
    for option in ("--project DIR", "--memory SLUG", "--user", "--server URL", "--token"):
        assert option in ran.stdout, option
    described = ran.stdout.split("\n  --project DIR", 1)[1].split("\n  -", 1)[0]
    assert "project" in described and "folder" in described
