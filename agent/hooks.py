"""The Claude Code session hooks, and the HTTP client `brain agent --server` uses: standard
library only, so a hook process never starts Django.

Why a lean entry point that asks the running server: SessionStart runs as a whole new process
before every session's first turn, and the target is under 300 ms at p50 with 100k live facts.
Measured on the 2-core reference machine, ``django.setup()`` alone takes about 600 ms and
loading MiniLM about 300 ms more, before a single query. The server (`make run`) already holds
the model, warm database connections and the read rules, so the hook sends it one request with a
token and prints the block it gets back. The hook itself imports only what it must: ``python -I
-S`` with ``json`` and ``socket`` starts in about 30 ms, where ``http.client`` (its email header
parser) or ``urllib.request`` add 40 to 70 ms under load, and ``dataclasses`` 10 ms; so the one
HTTP/1.1 exchange is written out here (a request, ``Connection: close``, a body read to the end,
chunked or not). `make bench` times the hook as a whole process against brainmem's CLI
(``agent/bench.py``).

Rules:
- The goal comes from the JSON payload Claude Code writes on stdin: its ``goal`` field, else
  ``prompt``, else the name of ``cwd`` (SessionStart payloads carry ``session_id``,
  ``transcript_path``, ``cwd``, ``source`` and no prompt). Never from argv: Claude Code passes
  none, and a hook that read ``$1`` would silently lose its goal.
- Whatever is printed on stdout by a SessionStart hook that exits 0 becomes context, so the hook
  prints the block and nothing else.
- A hook never takes a session down: no server, a refused token, an unknown memory, a timeout or
  a payload that is not JSON all mean no output and exit 0. ``TIMEOUT`` bounds the wait: the
  server answers a context request in tens of milliseconds (p95 62 ms at 100k facts); two
  seconds still covers a server's first request after it started while keeping a session
  start that waits on a dead server short. ``BRAIN_HOOK_DEBUG=1`` writes the reason for the
  silence to stderr, for a person checking an install.
- SessionEnd asks the server for the sleep pass (which also prunes and decays) and returns; the
  pass runs on the server, so quitting Claude Code is not held up by it.

The connection (server URL, token, memory, budget) is read from the JSON file named by
``--config``, which `brain agent install` writes with mode 0600 beside the user's Claude Code
settings, never into a project's files, so a token is not committed with a project.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import sys
import time
import urllib.parse

TIMEOUT = 2.0  # seconds: see the module docstring
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_BUDGET = 600
MAX_PAYLOAD = 1024 * 1024  # a hook payload is a few hundred bytes; never read without bound
CONTEXT_PATH = "/api/context"
SLEEP_PATH = "/api/agent/sleep"
URL_VARIABLE, TOKEN_VARIABLE, MEMORY_VARIABLE = "BRAIN_URL", "BRAIN_TOKEN", "BRAIN_MEMORY"


class ServerError(Exception):
    """One line for the person at the terminal: what the server said, or why it could not be
    reached. ``status`` is the HTTP status, 0 when there was no answer."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class Connection:
    """Where the server is, with which token, which memory and budget."""

    def __init__(self, url: str, token: str = "", memory: str = "", budget: int = DEFAULT_BUDGET):
        self.url, self.token, self.memory, self.budget = url, token, memory, budget
        self.timeout = TIMEOUT

    @classmethod
    def from_file(cls, path: str) -> Connection:
        """Raises OSError, ValueError (not JSON, or not the fields install writes)."""
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise ValueError(f"{path} is not a brain connection file")
        return cls(
            url=data["url"],
            token=str(data.get("token") or ""),
            memory=str(data.get("memory") or ""),
            budget=int(data.get("budget") or DEFAULT_BUDGET),
        )

    @classmethod
    def from_environment(cls, environ=os.environ) -> Connection:
        return cls(
            url=environ.get(URL_VARIABLE) or DEFAULT_URL,
            token=environ.get(TOKEN_VARIABLE, ""),
            memory=environ.get(MEMORY_VARIABLE, ""),
        )


class Client:
    """JSON over HTTP to brain's API with a token. Every failure is a ServerError. No proxy
    settings are read from the environment: a proxy cannot reach a server on loopback."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.base = connection.url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ServerError(f"{connection.url!r} is not a server URL (http://host:port).")
        self.parts = parts

    def call(self, method: str, path: str, body: dict | None = None, **query) -> dict:
        if self.connection.memory:
            query.setdefault("memory", self.connection.memory)
        target = self.parts.path.rstrip("/") + path
        if query:
            target += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v != ""})
        headers = {"Host": self.parts.netloc, "Accept": "application/json"}
        if self.connection.token:
            headers["Authorization"] = f"Token {self.connection.token}"
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            status, reason, raw = _exchange(
                self.parts, method, target, headers, data, self.connection.timeout
            )
        except (OSError, ValueError) as error:
            raise ServerError(
                f"Cannot reach brain at {self.base} ({_plain(error)}): is it running "
                "(make run), and is the URL right?"
            ) from None
        if status >= 400:
            raise ServerError(_refusal(status, reason, raw), status)
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            raise ServerError(f"{self.base} did not answer as brain's API does.") from None
        return answer if isinstance(answer, dict) else {"results": answer}


def _exchange(parts, method, target, headers, data, timeout) -> tuple[int, str, bytes]:
    """One HTTP/1.1 request and its whole answer: (status, reason, body). The whole exchange,
    not each read, is bounded by ``timeout``. Raises OSError (TimeoutError), ValueError (not
    HTTP)."""
    deadline = time.monotonic() + timeout
    secure = parts.scheme == "https"
    sock = socket.create_connection(
        (parts.hostname, parts.port or (443 if secure else 80)), timeout
    )
    if secure:
        import ssl  # only for https: it is the slowest import there is

        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
    with sock:
        lines = [f"{method} {target} HTTP/1.1", "Connection: close", f"Content-Length: {len(data)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        received = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            received.append(chunk)
    head, _, body = b"".join(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, status, *reason = status_line.split(" ", 2)
    if not version.startswith("HTTP/") or not status.isdigit():
        raise ValueError("not an HTTP answer")
    fields = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if fields.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    elif fields.get("content-length", "").isdigit():
        body = body[: int(fields["content-length"])]
    return int(status), reason[0] if reason else "", body


def _dechunk(body: bytes) -> bytes:
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2 :]
    return b"".join(out)


def _plain(error) -> str:
    if isinstance(error, TimeoutError):
        return "no answer in time"
    text = getattr(error, "strerror", None) or str(error)
    return text.rstrip(".") or type(error).__name__


def _refusal(status: int, reason: str, raw: bytes) -> str:
    try:
        detail = json.loads(raw or b"{}")
    except ValueError:
        detail = {}
    if isinstance(detail, dict) and detail.get("detail"):
        message = str(detail["detail"])
    elif isinstance(detail, dict) and detail:
        message = "; ".join(
            f"{field}: {' '.join(map(str, problems)) if isinstance(problems, list) else problems}"
            for field, problems in detail.items()
        )
    else:
        message = f"the server answered {status} {reason}".strip()
    if status == 401 or (status == 403 and "token" in message.lower()):
        message += " (check the token: --token or BRAIN_TOKEN)"
    return " ".join(message.split())


# The hooks -------------------------------------------------------------------------------------


def goal_from(payload: object) -> str:
    """What the session is about, from a hook payload: goal, else prompt, else the name of the
    working directory in words ("/home/sam/billing-service" → "billing service")."""
    if not isinstance(payload, dict):
        return ""
    for field in ("goal", "prompt"):
        value = payload.get(field)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd.strip():
        name = re.split(r"[\\/]", cwd.strip().rstrip("\\/"))[-1]
        return " ".join(re.sub(r"[-_.]+", " ", name).split())
    return ""


def read_payload(stream=None) -> object:
    """The JSON object on stdin, or None (a terminal, nothing, or not JSON)."""
    stream = stream if stream is not None else sys.stdin
    if stream is None or stream.closed or stream.isatty():
        return None
    try:
        # Claude Code writes the payload and closes stdin; a pipe nobody closes must not hold
        # the session (select works on pipes only on POSIX, elsewhere just read).
        waits = os.name == "posix" and _has_fileno(stream)
        if waits and not select.select([stream], [], [], TIMEOUT)[0]:
            return None
        return json.loads(stream.read(MAX_PAYLOAD) or "null")
    except (ValueError, OSError, UnicodeDecodeError):
        return None


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
    except (OSError, ValueError):
        return False
    return True


def session_start(connection: Connection, payload: object) -> str:
    """The memory block for this session, or "" (nothing to say). Raises ServerError."""
    answer = Client(connection).call(
        "POST",
        CONTEXT_PATH,
        {"question": goal_from(payload), "token_budget": connection.budget},
    )
    text = answer.get("text")
    return text if isinstance(text, str) else ""


def session_end(connection: Connection, payload: object) -> None:
    """Ask the server for the sleep pass (with prune and decay). Raises ServerError."""
    Client(connection).call("POST", SLEEP_PATH, {})


def _connection(argv: list[str]) -> Connection:
    if "--config" in argv:
        position = argv.index("--config")
        if position + 1 >= len(argv):
            raise ValueError("--config needs a file")
        return Connection.from_file(argv[position + 1])
    return Connection.from_environment()


USAGE = "usage: hooks.py session-start|session-end [--config FILE]  (payload: JSON on stdin)"


def main(argv: list[str] | None = None) -> int:
    """Always 0 for a hook: a session never fails because memory could not be read."""
    argv = list(sys.argv[1:] if argv is None else argv)
    event = argv[0] if argv else ""
    if event not in {"session-start", "session-end"}:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        connection = _connection(argv[1:])
        payload = read_payload()
        if event == "session-start":
            block = session_start(connection, payload)
            if block.strip():
                sys.stdout.write(block.rstrip("\n") + "\n")
        else:
            session_end(connection, payload)
    except Exception as problem:  # silence is the contract: see the docstring
        if os.environ.get("BRAIN_HOOK_DEBUG"):
            print(f"brain {event} hook: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
