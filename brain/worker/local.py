"""The local model, in the two API shapes local servers speak.

``OllamaAPI``: ``POST /api/chat`` (``stream: false``, ``options.num_predict`` = the call's
max_tokens, ``format`` = the call's JSON schema when it has one) and ``POST /api/embed``.
``OpenAIAPI`` (llama.cpp's server, vLLM, LM Studio, LocalAI, Ollama's own /v1…): ``POST
/v1/chat/completions`` (``response_format`` json_schema when the call has a schema) and ``POST
/v1/embeddings``. ``detect`` asks ``GET /api/tags`` (Ollama), then ``GET /v1/models``.

A model's answer comes back as a ``ModelAnswer`` or the call fails with ``ModelFailed`` naming
why in one line (the worker posts that as the call's error: the server's job then reports it).
Nothing here checks the answer against the schema: the server does, whoever the worker is. An
answer the model stopped at the token limit says so (``cut_off``: Ollama's ``done_reason`` or
the OpenAI ``finish_reason`` "length"), so a call that asked for JSON can report that rather than
the broken JSON it leads to.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from brain.worker import transport

DEFAULT_ENDPOINT = "http://127.0.0.1:11434"
PROBE_TIMEOUT_S = 5.0


class ModelFailed(Exception):
    """No answer from the local model: unreachable, an error, or an answer we cannot read."""


@dataclass(frozen=True)
class ModelAnswer:
    text: str = ""
    vectors: list[list[float]] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cut_off: bool = False  # the model stopped at the token limit, not at the answer's end

    def wire(self) -> dict[str, Any]:
        """The answer as the protocol posts it."""
        if self.vectors is not None:
            return {"vectors": self.vectors}
        return {
            "text": self.text,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


class LocalModel(abc.ABC):
    """A chat and an embedding call in one API's shape: a subclass names its paths and says
    what a chat request adds to the common body and where the answer's parts are."""

    api = ""  # "ollama" or "openai"
    chat_path = ""
    embed_path = ""

    def __init__(self, *, endpoint: str, model: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model = model

    def chat(
        self,
        *,
        system: str,
        prompt: str,
        max_tokens: int,
        schema: dict[str, Any] | None,
        timeout: float,
    ) -> ModelAnswer:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(system, prompt),
            "stream": False,
            **self._chat_options(max_tokens, schema),
        }
        return self._chat_answer(self._post(self.chat_path, body, timeout=timeout))

    def embed(self, *, texts: list[str], timeout: float) -> ModelAnswer:
        data = self._post(self.embed_path, {"model": self.model, "input": texts}, timeout=timeout)
        return ModelAnswer(vectors=_vectors(self._embeddings(data), len(texts)))

    @abc.abstractmethod
    def _chat_options(self, max_tokens: int, schema: dict[str, Any] | None) -> dict[str, Any]:
        """What a chat adds to the request's body (its length, the answer's shape)."""

    @abc.abstractmethod
    def _chat_answer(self, data: Any) -> ModelAnswer:
        """The answer's text and counts, from the chat's reply."""

    @abc.abstractmethod
    def _embeddings(self, data: Any) -> Any:
        """The vectors, from the embedding call's reply."""

    def _post(self, path: str, body: dict[str, Any], *, timeout: float) -> Any:
        try:
            response = transport.request(
                "POST", self.endpoint + path, body=body, timeout=max(timeout, 0.5)
            )
        except transport.Unreachable as error:
            raise ModelFailed(
                f"the local model at {self.endpoint} did not answer: {error}"
            ) from error
        if response.status != 200:
            raise ModelFailed(f"the local model answered HTTP {response.status}: {response.detail}")
        if not isinstance(response.data, dict):
            raise ModelFailed(f"the local model's answer is not a JSON object: {response.detail}")
        return response.data


class OllamaAPI(LocalModel):
    api = "ollama"
    chat_path = "/api/chat"
    embed_path = "/api/embed"

    def _chat_options(self, max_tokens: int, schema: dict[str, Any] | None) -> dict[str, Any]:
        options: dict[str, Any] = {"options": {"num_predict": max_tokens}}
        if schema is not None:
            options["format"] = schema
        return options

    def _chat_answer(self, data: Any) -> ModelAnswer:
        return ModelAnswer(
            text=_text(lambda: data["message"]["content"], "message.content"),
            input_tokens=_count(data.get("prompt_eval_count")),
            output_tokens=_count(data.get("eval_count")),
            cut_off=data.get("done_reason") == "length",
        )

    def _embeddings(self, data: Any) -> Any:
        return data.get("embeddings")


class OpenAIAPI(LocalModel):
    api = "openai"
    chat_path = "/v1/chat/completions"
    embed_path = "/v1/embeddings"

    def _chat_options(self, max_tokens: int, schema: dict[str, Any] | None) -> dict[str, Any]:
        options: dict[str, Any] = {"max_tokens": max_tokens}
        if schema is not None:
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema},
            }
        return options

    def _chat_answer(self, data: Any) -> ModelAnswer:
        text = _text(lambda: data["choices"][0]["message"]["content"], "choices[0].message.content")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ModelAnswer(
            text=text,
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            cut_off=data["choices"][0].get("finish_reason") == "length",
        )

    def _embeddings(self, data: Any) -> Any:
        items = data.get("data")
        if not isinstance(items, list):
            raise ModelFailed("no data list in the local model's embeddings answer")
        try:
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            return [item["embedding"] for item in ordered]
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise ModelFailed(f"an embedding without its vector ({error!r})") from error


APIS: dict[str, type[LocalModel]] = {"ollama": OllamaAPI, "openai": OpenAIAPI}


def connect(*, endpoint: str, model: str, api: str | None) -> LocalModel:
    """The local model at ``endpoint``: in ``api``'s shape, or the one ``detect`` finds.

    An endpoint given with its ``/v1`` (as OpenAI-compatible servers often print it) is the
    OpenAI shape at the address without it. Raises ModelFailed when detection finds neither.
    """
    endpoint = endpoint.rstrip("/")
    parts = urlsplit(endpoint)
    if parts.path.endswith("/v1"):
        endpoint = urlunsplit(parts._replace(path=parts.path[: -len("/v1")]))
        api = api or "openai"
    chosen = api or detect(endpoint)
    return APIS[chosen](endpoint=endpoint, model=model)


def detect(endpoint: str) -> str:
    """ "ollama" when ``GET /api/tags`` answers like Ollama, else "openai" when ``GET /v1/models``
    answers; ModelFailed naming both attempts otherwise."""
    tried = []
    for api, path, key in (("ollama", "/api/tags", "models"), ("openai", "/v1/models", "data")):
        try:
            response = transport.request("GET", endpoint + path, timeout=PROBE_TIMEOUT_S)
        except transport.Unreachable as error:
            raise ModelFailed(f"the local model at {endpoint} did not answer: {error}") from error
        if response.status == 200 and isinstance(response.data, dict) and key in response.data:
            return api
        tried.append(f"GET {path}: HTTP {response.status}")
    raise ModelFailed(
        f"{endpoint} speaks neither Ollama's API nor the OpenAI-compatible one "
        f"({'; '.join(tried)}); name it with --api"
    )


def listed_models(endpoint: str, api: str) -> list[str] | None:
    """The model names the server lists, or None when it does not say."""
    path, key, name = (
        ("/api/tags", "models", "name") if api == "ollama" else ("/v1/models", "data", "id")
    )
    try:
        response = transport.request("GET", endpoint + path, timeout=PROBE_TIMEOUT_S)
    except transport.Unreachable:
        return None
    items = response.data.get(key) if isinstance(response.data, dict) else None
    if response.status != 200 or not isinstance(items, list):
        return None
    return [str(item.get(name)) for item in items if isinstance(item, dict) and item.get(name)]


def _messages(system: str, prompt: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": prompt}]


def _text(read: Callable[[], Any], where: str) -> str:
    """The answer's text, read by ``read`` at ``where``; ModelFailed when it is not there."""
    try:
        text = read()
    except (KeyError, IndexError, TypeError) as error:
        raise ModelFailed(f"no {where} in the local model's answer ({error!r})") from error
    if not isinstance(text, str):
        raise ModelFailed(f"{where} in the local model's answer is not text")
    return text


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _vectors(value: Any, expected: int) -> list[list[float]]:
    """Vectors of numbers, one per text asked for; ModelFailed naming what was wrong otherwise."""
    if not isinstance(value, list):
        raise ModelFailed("no list of embeddings in the local model's answer")
    if len(value) != expected:
        raise ModelFailed(f"the local model gave {len(value)} embeddings for {expected} texts")
    vectors = []
    for vector in value:
        if not isinstance(vector, list) or not vector:
            raise ModelFailed("an embedding in the local model's answer is not a list of numbers")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector):
            raise ModelFailed("an embedding in the local model's answer is not a list of numbers")
        vectors.append([float(x) for x in vector])
    return vectors
