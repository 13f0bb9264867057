"""`make run` refuses clearly, with one line and a non-zero exit, when it cannot start."""

import fcntl
import os
import shutil
import socket
import subprocess
import sys

from brain.embedded import BASE_DIR


def _run(env_overrides: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_overrides}
    return subprocess.run(
        [sys.executable, "-m", "brain.run"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_busy_port_is_named_with_how_to_fix_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run({"BRAIN_PORT": str(port), "BRAIN_VAR_DIR": str(tmp_path / "var")})

    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"brain: port {port} on 127.0.0.1 is already in use by another program: stop it, "
        f"or run `BRAIN_PORT={port + 1} make run`."
    )


def test_a_var_folder_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")

    result = _run({"BRAIN_VAR_DIR": str(blocker / "var")})

    assert result.returncode == 1
    assert result.stderr.startswith(f"brain: {blocker / 'var'} is not writable")
    assert "BRAIN_VAR_DIR" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_second_make_run_says_one_is_already_running(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    with open(var / "run.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        result = _run({"BRAIN_VAR_DIR": str(var)})

    assert result.returncode == 1
    assert result.stderr.strip().startswith("brain: brain is already running (make run, pid 4242)")


def test_make_run_without_python_3_12_says_what_is_needed(tmp_path):
    shutil.copy(BASE_DIR / "Makefile", tmp_path / "Makefile")
    for requirements in BASE_DIR.glob("requirements*.txt"):
        shutil.copy(requirements, tmp_path / requirements.name)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no pyenv, no python3.12

    result = subprocess.run(
        ["make", "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode != 0
    assert "brain needs Python 3.12 or newer" in result.stderr
    assert not (tmp_path / ".venv").exists()
