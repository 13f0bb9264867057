"""A stand-in for the Anthropic Messages API on loopback, so tests drive the real SDK.

Usage in a test module (pytest-django's ``settings`` fixture points the gateway at it)::

    @pytest.fixture
    def stub(settings):
        with MessagesStub() as server:
            server.configure(settings)
            yield server

    def test_...(stub, db):
        stub.script(stub_json({"decision": "keep", "reason": "nothing new"}))
        ...
        assert stub.requests[0].body["model"] == "claude-test"

Each request takes the next scripted reply; the last one repeats. Every request received is
kept in ``requests`` (path, headers, JSON body). ``close`` (or leaving the ``with``) wakes any
reply that is still hanging, so a timeout test does not wait for its hang to run out.
Test support only: nothing in the running app imports this module.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

TEST_API_KEY = "test-key"


@dataclass(frozen=True)
class StubReply:
    """What the stub answers to one request."""

    text: str = ""  # the assistant's text, for a 200
    status: int = 200
    error_type: str = ""  # for a non-200: "overloaded_error", "invalid_request_error"...
    error_message: str = ""
    hang_s: float = 0.0  # wait this long before answering (woken early by close())
    input_tokens: int = 120
    output_tokens: int = 45
    stop_reason: str = "end_turn"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StubRequest:
    """One request the stub received."""

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


def stub_text(text: str, **overrides: Any) -> StubReply:
    """A 200 whose assistant text is ``text``."""
    return StubReply(text=text, **overrides)


def stub_json(answer: dict[str, Any], *, fenced: bool = False, **overrides: Any) -> StubReply:
    """A 200 whose text is ``answer`` as JSON, optionally inside a ```json fence."""
    text = json.dumps(answer, ensure_ascii=False)
    return StubReply(text=f"```json\n{text}\n```" if fenced else text, **overrides)


def stub_error(status: int, error_type: str, message: str, **overrides: Any) -> StubReply:
    """An error in the Messages API's shape, e.g. ``stub_error(529, "overloaded_error", ...)``."""
    return StubReply(status=status, error_type=error_type, error_message=message, **overrides)


def stub_overloaded() -> StubReply:
    return stub_error(529, "overloaded_error", "Overloaded")


def stub_hang(seconds: float = 30.0) -> StubReply:
    """A reply that arrives only after ``seconds``: longer than any timeout a test uses."""
    return StubReply(text="{}", hang_s=seconds)


class MessagesStub:
    """``POST /v1/messages`` on 127.0.0.1, an ephemeral port, in a background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: list[StubReply] = [
            stub_error(400, "invalid_request_error", "MessagesStub: no reply was scripted")
        ]
        self._requests: list[StubRequest] = []
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def requests(self) -> list[StubRequest]:
        with self._lock:
            return list(self._requests)

    def script(self, *replies: StubReply) -> None:
        """Answer the next requests with ``replies`` in order; the last one then repeats."""
        if not replies:
            raise ValueError("script() needs at least one reply")
        with self._lock:
            self._script = list(replies)

    def configure(self, settings: Any, *, max_retries: int = 0) -> None:
        """Point the gateway at this stub (``settings`` is pytest-django's fixture).

        Retries default to 0 so a failing reply is seen once; pass 1 to test the retry.
        """
        settings.ANTHROPIC_API_KEY = TEST_API_KEY
        settings.ANTHROPIC_BASE_URL = self.base_url
        settings.BRAIN_LLM_MAX_RETRIES = max_retries

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

    def _take(self, request: StubRequest) -> StubReply:
        """Record ``request`` and return the reply scripted for it."""
        with self._lock:
            self._requests.append(request)
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() can join them
    block_on_close = True
    stub: MessagesStub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # no request thread can block for ever on a silent socket
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        request = StubRequest(
            method="POST",
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        stub = self.server.stub
        self.close_connection = True  # one request per connection: nothing lingers at close()
        if self.path.split("?")[0] != "/v1/messages":
            stub._record(request)
            reply = stub_error(404, "not_found_error", f"MessagesStub: no route {self.path}")
        elif not {"model", "max_tokens", "messages"} <= body.keys():
            stub._record(request)
            reply = stub_error(400, "invalid_request_error", "model, max_tokens, messages needed")
        else:
            reply = stub._take(request)
        if reply.hang_s and stub._stopping.wait(reply.hang_s):
            return  # closing: drop the connection without an answer
        self._send(reply, model=str(body.get("model", "")), number=len(stub.requests))

    def _send(self, reply: StubReply, *, model: str, number: int) -> None:
        if reply.status == 200:
            payload: dict[str, Any] = {
                "id": f"msg_stub_{number}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": reply.stop_reason,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": reply.input_tokens,
                    "output_tokens": reply.output_tokens,
                },
            }
        else:
            payload = {
                "type": "error",
                "error": {"type": reply.error_type, "message": reply.error_message},
                "request_id": f"req_stub_{number}",
            }
        data = json.dumps(payload).encode()
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("connection", "close")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test): nobody is left to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
