"""Stand-ins for a local model on loopback, in the two API shapes a worker speaks.

``OllamaStub``: ``GET /api/tags``, ``POST /api/chat``, ``POST /api/embed``. ``OpenAIStub``:
``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/embeddings``. They are to the
worker program (brain/worker/) what ``MessagesStub`` (``messages.py`` beside it) is to the
gateway::

    def test_...(ollama_stub):               # fixtures in conftest.py
        ollama_stub.script(local_json({"decision": "keep"}), local_hang(30))
        ...                                  # a real `brain worker --endpoint ollama_stub.base_url`
        assert ollama_stub.chats[0].body["format"] == {...}

Chat requests take the next scripted reply (the last one repeats); with nothing scripted they
are answered with an error naming that, so a test never passes on a default. Embeddings answer
a deterministic unit vector per text (``vector_for``; ``dimensions`` long) unless replies were
scripted with ``script_embed``. A reply can be text, JSON, an error in the API's own shape,
garbage (a body that is not JSON), or a hang (woken early by ``close()``). Every request is
kept in ``requests`` (``chats`` and ``embeds`` for those two kinds).
Test support only: nothing in the running app imports this module.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from brain.tests.stubs.loopback import Answer, LoopbackStub, StubRequest

DIMENSIONS = 384  # brain's embedder's; a test of the wrong shape passes another number


@dataclass(frozen=True)
class LocalReply:
    """What a stub answers to one chat or embed request."""

    text: str = ""  # chat: the assistant's text
    vectors: list[list[float]] | None = None  # embed: None = one vector_for() per text
    status: int = 200
    error: str = ""  # for a non-200: the message, in the API's own error shape
    raw: str | None = None  # sent verbatim as the body (garbage), whatever the status
    hang_s: float = 0.0  # wait this long before answering (woken early by close())
    input_tokens: int = 120
    output_tokens: int = 45
    finish: str = "stop"  # "length": cut off at the token limit


def local_text(text: str, **overrides: Any) -> LocalReply:
    return LocalReply(text=text, **overrides)


def local_json(answer: Any, **overrides: Any) -> LocalReply:
    """A chat answer whose text is ``answer`` as JSON (what a model asked for a schema gives)."""
    return LocalReply(text=json.dumps(answer, ensure_ascii=False), **overrides)


def local_error(status: int, message: str, **overrides: Any) -> LocalReply:
    return LocalReply(status=status, error=message, **overrides)


def local_garbage(body: str = "<html>Bad gateway</html>", **overrides: Any) -> LocalReply:
    """A 200 whose body is not JSON at all."""
    return LocalReply(raw=body, **overrides)


def local_hang(seconds: float = 30.0, **overrides: Any) -> LocalReply:
    """An answer that comes only after ``seconds`` (a slow model)."""
    return LocalReply(text="{}", hang_s=seconds, **overrides)


def vector_for(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector that depends only on ``text``: the same text, the same vector."""
    seed = hashlib.sha256(text.encode()).digest()
    values = []
    for index in range(dimensions):
        byte = seed[index % len(seed)] ^ (index * 37 % 251)
        values.append(byte / 255.0 - 0.5)
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class _LocalStub(LoopbackStub):
    """A model server on 127.0.0.1, an ephemeral port, in a background thread."""

    api: ClassVar[str]
    chat_path: ClassVar[str]
    embed_path: ClassVar[str]
    list_path: ClassVar[str]

    def __init__(self, *, models: tuple[str, ...] = ("llama3.2",), dimensions: int = DIMENSIONS):
        self.models = models
        self.dimensions = dimensions
        self._chat: list[LocalReply] = [
            local_error(400, f"{type(self).__name__}: no chat reply was scripted")
        ]
        self._embed: list[LocalReply] = [LocalReply()]
        super().__init__()

    @property
    def chats(self) -> list[StubRequest]:
        return [request for request in self.requests if request.path == self.chat_path]

    @property
    def embeds(self) -> list[StubRequest]:
        return [request for request in self.requests if request.path == self.embed_path]

    def script(self, *replies: LocalReply) -> None:
        """Answer the next chat requests with ``replies`` in order; the last one then repeats."""
        if not replies:
            raise ValueError("script() needs at least one reply")
        with self._lock:
            self._chat = list(replies)

    def script_embed(self, *replies: LocalReply) -> None:
        """The same for embedding requests (default: vector_for() each text)."""
        if not replies:
            raise ValueError("script_embed() needs at least one reply")
        with self._lock:
            self._embed = list(replies)

    def answer(self, request: StubRequest) -> Answer | None:
        """The status and body for ``request`` (a route, an unknown path, or a bad body)."""
        path = request.path.split("?")[0]
        if request.method == "GET" and path == self.list_path:
            self._record(request)
            return Answer(200, self.listing())
        if request.method == "POST" and path == self.chat_path:
            if not {"model", "messages"} <= request.body.keys():
                self._record(request)
                return Answer(400, self.error_body("model and messages are needed"))
            reply = self._take(request, self._chat)
            return None if self._hung_until_closed(reply.hang_s) else self.reply(reply, request)
        if request.method == "POST" and path == self.embed_path:
            if not {"model", "input"} <= request.body.keys():
                self._record(request)
                return Answer(400, self.error_body("model and input are needed"))
            reply = self._take(request, self._embed)
            if self._hung_until_closed(reply.hang_s):
                return None
            return self.reply(reply, request, embed=True)
        self._record(request)
        name = type(self).__name__
        return Answer(404, self.error_body(f"{name}: no route {request.method} {path}"))

    def reply(self, reply: LocalReply, request: StubRequest, *, embed: bool = False) -> Answer:
        if reply.raw is not None:
            return Answer(reply.status, reply.raw)
        if reply.status != 200:
            return Answer(reply.status, self.error_body(reply.error))
        if embed:
            texts = request.body["input"]
            texts = [texts] if isinstance(texts, str) else list(texts)
            vectors = reply.vectors
            if vectors is None:
                vectors = [vector_for(str(text), self.dimensions) for text in texts]
            return Answer(200, self.embed_body(vectors, request, reply))
        return Answer(200, self.chat_body(reply, request))

    # The API's own shapes (subclasses) ----------------------------------------------------

    @abstractmethod
    def listing(self) -> dict[str, Any]:
        """The answer to the API's list of models."""

    @abstractmethod
    def error_body(self, message: str) -> dict[str, Any]:
        """An error in the API's own shape."""

    @abstractmethod
    def chat_body(self, reply: LocalReply, request: StubRequest) -> dict[str, Any]:
        """A chat answer in the API's own shape."""

    @abstractmethod
    def embed_body(
        self, vectors: list[list[float]], request: StubRequest, reply: LocalReply
    ) -> dict[str, Any]:
        """An embedding answer in the API's own shape."""


class OllamaStub(_LocalStub):
    """Ollama's API: /api/tags, /api/chat (``stream: false``), /api/embed."""

    api = "ollama"
    chat_path = "/api/chat"
    embed_path = "/api/embed"
    list_path = "/api/tags"

    def listing(self) -> dict[str, Any]:
        return {
            "models": [
                {"name": f"{name}:latest", "model": f"{name}:latest"} for name in self.models
            ]
        }

    def error_body(self, message: str) -> dict[str, Any]:
        return {"error": message}

    def chat_body(self, reply: LocalReply, request: StubRequest) -> dict[str, Any]:
        return {
            "model": request.body.get("model"),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "message": {"role": "assistant", "content": reply.text},
            "done": True,
            "done_reason": reply.finish,
            "prompt_eval_count": reply.input_tokens,
            "eval_count": reply.output_tokens,
        }

    def embed_body(
        self, vectors: list[list[float]], request: StubRequest, reply: LocalReply
    ) -> dict[str, Any]:
        return {
            "model": request.body.get("model"),
            "embeddings": vectors,
            "prompt_eval_count": reply.input_tokens,
        }


class OpenAIStub(_LocalStub):
    """The OpenAI-compatible API: /v1/models, /v1/chat/completions, /v1/embeddings."""

    api = "openai"
    chat_path = "/v1/chat/completions"
    embed_path = "/v1/embeddings"
    list_path = "/v1/models"

    def listing(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model"} for name in self.models]}

    def error_body(self, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}

    def chat_body(self, reply: LocalReply, request: StubRequest) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "model": request.body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": reply.finish,
                }
            ],
            "usage": {
                "prompt_tokens": reply.input_tokens,
                "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
            },
        }

    def embed_body(
        self, vectors: list[list[float]], request: StubRequest, reply: LocalReply
    ) -> dict[str, Any]:
        return {
            "object": "list",
            "model": request.body.get("model"),
            "data": [
                {"object": "embedding", "index": index, "embedding": vector}
                for index, vector in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": reply.input_tokens, "total_tokens": reply.input_tokens},
        }
