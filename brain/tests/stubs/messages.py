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
from dataclasses import dataclass, field
from typing import Any

from brain.tests.stubs.loopback import Answer, LoopbackStub, StubRequest

__all__ = ["MessagesStub", "StubReply", "StubRequest"]

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


class MessagesStub(LoopbackStub):
    """``POST /v1/messages`` on 127.0.0.1, an ephemeral port, in a background thread."""

    def __init__(self) -> None:
        self._script: list[StubReply] = [
            stub_error(400, "invalid_request_error", "MessagesStub: no reply was scripted")
        ]
        super().__init__()

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

    def answer(self, request: StubRequest) -> Answer | None:
        if request.method != "POST" or request.path.split("?")[0] != "/v1/messages":
            self._record(request)
            reply = stub_error(404, "not_found_error", f"MessagesStub: no route {request.path}")
        elif not {"model", "max_tokens", "messages"} <= request.body.keys():
            self._record(request)
            reply = stub_error(400, "invalid_request_error", "model, max_tokens, messages needed")
        else:
            reply = self._take(request, self._script)
        if self._hung_until_closed(reply.hang_s):
            return None  # closing: drop the connection without an answer
        number = len(self.requests)
        if reply.status == 200:
            body: dict[str, Any] = {
                "id": f"msg_stub_{number}",
                "type": "message",
                "role": "assistant",
                "model": str(request.body.get("model", "")),
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": reply.stop_reason,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": reply.input_tokens,
                    "output_tokens": reply.output_tokens,
                },
            }
        else:
            body = {
                "type": "error",
                "error": {"type": reply.error_type, "message": reply.error_message},
                "request_id": f"req_stub_{number}",
            }
        return Answer(reply.status, body, reply.headers)
