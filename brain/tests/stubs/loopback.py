"""What every stand-in for an outside HTTP service has in common (the Messages API in
``messages.py``, a local model in ``local_model.py``): a server on 127.0.0.1 at an ephemeral
port in a background thread, every request kept, one request per connection, and ``close()``
waking any reply still hanging so a timeout test does not wait for its hang to run out.

A stub subclasses ``LoopbackStub`` and answers in ``answer(request)`` with a status and a body
(a dict sent as JSON, a str sent as text/html), or ``None`` to drop the connection unanswered
(closing while a reply hangs). Test support only: nothing in the running app imports this.

Why not pytest-httpserver: it would give the server thread, the request log and ordered
replies, which are the standard library's ``ThreadingHTTPServer`` and a few lines here. What the
stubs need beyond those — a reply that hangs until the stub closes, a connection dropped
unanswered, ``close()`` joining every request thread so nothing outlives its test, the two API
shapes and their scripts — would be this same code in its handlers, with werkzeug and the plugin
added to the dev requirements.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True)
class StubRequest:
    """One request a stub received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """The text of the last user message (how the gateway sends its prompt)."""
        content = self.body["messages"][-1]["content"]
        if isinstance(content, str):
            return content
        return "".join(part.get("text", "") for part in content)

    @property
    def system(self) -> str:
        system = self.body.get("system", "")
        if isinstance(system, str):
            return system
        return "".join(part.get("text", "") for part in system)


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] | None = None


class LoopbackStub(ABC):
    """A stub's server, its requests and its closing; subclasses give ``answer``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[StubRequest] = []
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @abstractmethod
    def answer(self, request: StubRequest) -> Answer | None:
        """The status and body for ``request``, or None to drop the connection unanswered."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def requests(self) -> list[StubRequest]:
        with self._lock:
            return list(self._requests)

    def close(self) -> None:
        """Wake hanging replies, stop serving and join every thread. Safe to call twice."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()  # joins the request threads (block_on_close)
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _record(self, request: StubRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _take[T](self, request: StubRequest, script: list[T]) -> T:
        """Record ``request`` and return the reply ``script`` has for it (the last repeats)."""
        with self._lock:
            self._requests.append(request)
            return script.pop(0) if len(script) > 1 else script[0]

    def _hung_until_closed(self, seconds: float) -> bool:
        """Wait ``seconds`` before answering; True when the stub closed meanwhile."""
        return bool(seconds) and self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() can join them
    block_on_close = True
    stub: LoopbackStub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # no request thread can block for ever on a silent socket
    server: _Server

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        request = StubRequest(
            method=method,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body if isinstance(body, dict) else {"_body": body},
        )
        self.close_connection = True  # one request per connection: nothing lingers at close()
        answer = self.server.stub.answer(request)
        if answer is None:
            return  # closing while hanging: drop the connection without an answer
        if isinstance(answer.body, str):
            data, kind = answer.body.encode(), "text/html"
        else:
            data, kind = json.dumps(answer.body).encode(), "application/json"
        try:
            self.send_response(answer.status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.send_header("connection", "close")
            for name, value in (answer.headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test): nobody is left to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
