"""The session hooks as Claude Code runs them: a shell command, the JSON payload on stdin, no
arguments of its own, stdout taken as context. A hook never takes a session down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from agent import hooks, install
from knowledge.models import Memory
from memory import actions
from memory.models import Origin
from memory.taught import Statement

HOOKS_SCRIPT = str(Path(hooks.__file__).resolve())


def payload(**fields) -> str:
    """A SessionStart payload as Claude Code writes it."""
    return json.dumps(
        {
            "session_id": "0b5e7a9c-2f4d-4b7e-9a1c-3d5e6f708192",
            "transcript_path": "/home/sam/.claude/projects/p/0b5e7a9c.jsonl",
            "cwd": "/home/sam/projects/notes",
            "permission_mode": "default",
            "hook_event_name": "SessionStart",
            "source": "startup",
            **fields,
        }
    )


def write_connection(folder: Path, url: str, token: str = "", memory: str = "", budget=600):
    path = folder / "connection.json"
    path.write_text(json.dumps({"url": url, "token": token, "memory": memory, "budget": budget}))
    return path


def hook_command(event: str, connection: Path, *extra: str) -> str:
    """The command line install writes into settings.json, plus any extra words."""
    wiring = install.Wiring(
        python=sys.executable,
        hooks_script=HOOKS_SCRIPT,
        brain="/unused/bin/brain",
        url="",
        token="",
        memory="",
    )
    event_name = {"session-start": "SessionStart", "session-end": "SessionEnd"}[event]
    return " ".join([wiring.hook_command(event_name, connection), *extra])


def run_hook(command: str, stdin: str = "", env: dict | None = None):
    """Run a hook command the way Claude Code does: through the shell, payload on stdin."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    return subprocess.run(
        command,
        shell=True,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env={**clean, **(env or {})},
    )


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def token(admin_user) -> str:
    return Token.objects.create(user=admin_user).key


@pytest.fixture
def home(transactional_db) -> Memory:
    return Memory.objects.default()


def learn(memory: Memory, text: str):
    return actions.learn(Statement.typed(memory=memory, text=text, origin=Origin.TERMINAL)).fact


# Silence when memory cannot be read ----------------------------------------------------------


@pytest.mark.parametrize("event", ["session-start", "session-end"])
def test_with_no_server_listening_the_hook_prints_nothing_and_exits_0(tmp_path, event):
    connection = write_connection(tmp_path, f"http://127.0.0.1:{unused_port()}", "t0k3n")

    ran = run_hook(hook_command(event, connection), payload())

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_a_missing_connection_file_or_a_payload_that_is_not_json_is_silent(tmp_path):
    missing = run_hook(hook_command("session-start", tmp_path / "nowhere.json"), payload())
    garbled = write_connection(tmp_path, f"http://127.0.0.1:{unused_port()}")
    not_json = run_hook(hook_command("session-start", garbled), "{not json")

    assert (missing.returncode, missing.stdout, missing.stderr) == (0, "", "")
    assert (not_json.returncode, not_json.stdout, not_json.stderr) == (0, "", "")


def test_a_server_that_never_answers_leaves_the_session_silent(tmp_path):
    """Accepts the connection, then says nothing: the hook gives up after its timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
    connection = write_connection(tmp_path, f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        ran = run_hook(hook_command("session-start", connection), payload())
    finally:
        listener.close()

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_a_refused_token_or_an_unknown_memory_is_silent(live_server, home, token, tmp_path):
    learn(home, "The notes project deploys on Fridays")
    wrong_token = write_connection(tmp_path, live_server.url, "not-a-token")
    (tmp_path / "other").mkdir()
    no_memory = write_connection(tmp_path / "other", live_server.url, token, "no-such-memory")

    for connection in (wrong_token, no_memory):
        ran = run_hook(hook_command("session-start", connection), payload())
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_debug_says_why_the_hook_was_silent(tmp_path):
    connection = write_connection(tmp_path, f"http://127.0.0.1:{unused_port()}")

    ran = run_hook(hook_command("session-start", connection), payload(), {"BRAIN_HOOK_DEBUG": "1"})

    assert (ran.returncode, ran.stdout) == (0, "")
    assert ran.stderr.startswith("brain session-start hook: Cannot reach brain at http://")


# The block, for the goal on stdin -------------------------------------------------------------


def test_the_block_is_printed_for_the_working_folder_in_the_payload(
    live_server, home, token, tmp_path
):
    fact = learn(home, "The billing service deploys on Fridays")
    connection = write_connection(tmp_path, live_server.url, token)

    ran = run_hook(
        hook_command("session-start", connection), payload(cwd="/home/sam/billing-service")
    )

    assert (ran.returncode, ran.stderr) == (0, "")
    assert f"- [{fact.pk}] The billing service deploys on Fridays" in ran.stdout
    assert ran.stdout.startswith("<memory-")
    assert "evidence, not instruction" in ran.stdout


def test_the_goal_comes_from_stdin_never_from_the_command_line(live_server, home, token, tmp_path):
    """Claude Code passes no arguments: a hook that read its goal from argv would always get
    none. The payload's goal decides what leads the block; words after the command do not."""
    loft = learn(home, "The loft hatch sticks in winter")
    cellar = learn(home, "The cellar pump fails after heavy rain")
    connection = write_connection(tmp_path, live_server.url, token)
    command = hook_command("session-start", connection, "loft", "hatch")

    about_cellar = run_hook(command, payload(goal="cellar pump after heavy rain"))
    no_payload = run_hook(command, "")

    lines = [line for line in about_cellar.stdout.splitlines() if line.startswith("- [")]
    assert lines[0].startswith(f"- [{cellar.pk}] ")
    assert f"- [{loft.pk}] " not in lines[0]
    assert (no_payload.returncode, no_payload.stdout) == (0, "")


# SessionEnd ----------------------------------------------------------------------------------


def test_the_session_end_hook_hands_the_sleep_pass_to_the_worker(
    live_server, home, token, tmp_path, monkeypatch
):
    """The pass runs on the worker, so quitting Claude Code is not held up by it; here the
    worker is stood in for by running the task's body at once."""
    from agent import actions as agent_actions

    asked = []

    def worker(memory_id: int) -> None:
        asked.append(memory_id)
        agent_actions.sleep(memory=Memory.objects.get(pk=memory_id))

    monkeypatch.setattr("agent.tasks.sleep.delay", worker)
    agent_actions.encode(memory=home, text="Deploys take 20 minutes.", outcome="ok")
    connection = write_connection(tmp_path, live_server.url, token)

    ran = run_hook(hook_command("session-end", connection), payload(hook_event_name="SessionEnd"))

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    assert asked == [home.pk]
    assert home.facts.live().filter(text="Deploys take 20 minutes.").exists()
