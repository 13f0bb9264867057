"""The embedded servers, each in a var/ of its own so the test never touches the real one."""

import os
import signal
import subprocess
import sys
import time

import pytest

from brain.embedded import BASE_DIR


def _in_subprocess(var_dir, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BRAIN_VAR_DIR": str(var_dir)}
    return subprocess.run(
        [sys.executable, "-c", f"from brain import embedded\n{code}"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _start_two_at_once(var_dir, server: str) -> list[str]:
    code = f"print(embedded.{server}.ensure_running())"
    env = {**os.environ, "BRAIN_VAR_DIR": str(var_dir)}
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", f"from brain import embedded\n{code}"],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    return sorted(starter.communicate(timeout=120)[0].strip() for starter in starters)


@pytest.fixture
def var_dir(tmp_path):
    yield tmp_path / "var"
    for server in ("postgres", "valkey"):
        _in_subprocess(tmp_path / "var", f"embedded.{server}.stop()")


def _psql(var_dir, sql: str) -> str:
    code = f"""
import subprocess
p = embedded.postgres
out = p._run([str(p.bin_dir / "psql"), "-h", str(p.socket_dir), "-U", "postgres", "-d",
              "brain", "-tAc", {sql!r}], check=True)
print(out.stdout.strip())
"""
    result = _in_subprocess(var_dir, code)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_two_processes_starting_postgres_at_once_share_one_server(var_dir):
    assert _start_two_at_once(var_dir, "postgres") == ["False", "True"]

    assert (
        _psql(var_dir, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
        == "1"
    )


def test_postgres_killed_hard_recovers_on_the_next_start_with_its_data(var_dir):
    _in_subprocess(var_dir, "embedded.postgres.ensure_running()")
    _psql(var_dir, "CREATE TABLE kept (note text); INSERT INTO kept VALUES ('still here')")
    pid = int((var_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])

    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)  # the stale postmaster.pid and socket stay behind

    restarted = _in_subprocess(var_dir, "print(embedded.postgres.ensure_running())")
    assert restarted.stdout.strip() == "True", restarted.stderr
    assert _psql(var_dir, "SELECT note FROM kept") == "still here"


def test_two_processes_starting_valkey_at_once_share_one_server(var_dir):
    assert _start_two_at_once(var_dir, "valkey") == ["False", "True"]


def test_valkey_killed_hard_recovers_on_the_next_start_with_its_saved_data(var_dir):
    setup = _in_subprocess(
        var_dir,
        """
import redis
embedded.valkey.ensure_running()
client = redis.Redis(unix_socket_path=str(embedded.valkey.socket_path))
client.set("kept", "still here")
client.save()
print(embedded.valkey.running_pid())
""",
    )
    os.kill(int(setup.stdout.strip()), signal.SIGKILL)
    time.sleep(0.3)

    after = _in_subprocess(
        var_dir,
        """
import redis
print(embedded.valkey.ensure_running())
print(redis.Redis(unix_socket_path=str(embedded.valkey.socket_path)).get("kept").decode())
""",
    )
    assert after.stdout.split() == ["True", "still", "here"], after.stderr
