"""`make run`: the embedded servers, migrations, an admin account, then web, worker and beat.

Their output is interleaved and labelled (honcho). Ctrl-C stops the three processes and then the
embedded servers, cleanly. A second `make run` while one runs says so and exits without touching
anything. Every refusal is one line naming the problem and the fix, with a non-zero exit.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

from brain import embedded

BASE_DIR = embedded.BASE_DIR
HOST = "127.0.0.1"


class CannotStart(Exception):
    """One line for the person at the terminal."""


def main() -> int:
    port = _port()
    try:
        _check_var_writable()
        lock = _claim_run_lock()
        _check_port_free(port)
        started = _start_embedded_servers()
    except (CannotStart, embedded.EmbeddedServiceError) as problem:
        print(f"brain: {problem}", file=sys.stderr)
        return 1
    try:
        _manage("migrate", "--noinput")
        _manage("ensure_admin")
        if os.environ.get("DJANGO_DEBUG", "1").lower() in {"0", "false", "no", "off"}:
            _manage("collectstatic", "--noinput", "-v", "0")
        print(f"brain: starting web, worker and beat — open http://{HOST}:{port}", flush=True)
        return _run_processes(port)
    except subprocess.CalledProcessError as failure:
        print(
            f"brain: `{' '.join(failure.cmd[1:])}` failed (exit {failure.returncode}); "
            "see the output above.",
            file=sys.stderr,
        )
        return 1
    finally:
        _stop_embedded_servers(started)
        lock.close()


def _port() -> int:
    raw = os.environ.get("BRAIN_PORT", "8000")
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        print(f"brain: BRAIN_PORT={raw!r} is not a port number (1-65535).", file=sys.stderr)
        sys.exit(2)
    return int(raw)


def _check_var_writable() -> None:
    var = embedded.VAR_DIR
    try:
        var.mkdir(parents=True, exist_ok=True)
        probe = var / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise CannotStart(
            f"{var} is not writable ({error.strerror}): fix its permissions, or set "
            "BRAIN_VAR_DIR to a folder you can write."
        ) from None


def _claim_run_lock():
    handle = open(embedded.VAR_DIR / "run.lock", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise CannotStart(
            f"brain is already running (make run, pid {holder}); use that one, or stop it "
            "with Ctrl-C first."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            raise CannotStart(
                f"port {port} on {HOST} is already in use by another program: stop it, or "
                f"run `BRAIN_PORT={port + 1} make run`."
            ) from None


def _start_embedded_servers() -> list:
    started = []
    if embedded.uses_embedded_database():
        print("brain: starting the embedded PostgreSQL (var/postgres)…", flush=True)
        embedded.postgres.ensure_running()
        started.append(embedded.postgres)
    if embedded.uses_embedded_broker():
        print("brain: starting the embedded Valkey (var/valkey)…", flush=True)
        embedded.valkey.ensure_running()
        started.append(embedded.valkey)
    return started


def _stop_embedded_servers(servers: list) -> None:
    for server in reversed(servers):
        print(f"brain: stopping {type(server).__name__.removeprefix('Embedded')}…", flush=True)
        server.stop()


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(BASE_DIR / "manage.py"), *args], check=True, cwd=BASE_DIR)


def _run_processes(port: int) -> int:
    from honcho.manager import Manager

    python = sys.executable
    celery = str(Path(python).with_name("celery"))
    manager = Manager()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    manager.add_process(
        "web", f"{python} manage.py runserver {HOST}:{port}", env=env, cwd=str(BASE_DIR)
    )
    manager.add_process(
        "worker",
        f"{celery} -A brain worker --loglevel INFO --concurrency 2",
        env=env,
        cwd=str(BASE_DIR),
    )
    manager.add_process(
        "beat", f"{celery} -A brain beat --loglevel INFO", env=env, cwd=str(BASE_DIR)
    )
    manager.loop()
    # honcho exits non-zero when a process died on its own; Ctrl-C is a clean stop.
    return 0 if manager.returncode in (0, None, -2, 130) else manager.returncode


if __name__ == "__main__":
    sys.exit(main())
