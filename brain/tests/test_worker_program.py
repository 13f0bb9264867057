"""The worker program on its own: a real `brain worker` process against a stand-in brain server
that speaks the wire protocol of /api/worker/ (no database), and the stub local models.

What the end-to-end tests against the real server (test_worker_program_e2e.py) take for granted
is pinned here: it needs nothing but Python, it speaks both local APIs as they are documented,
it keeps a lease alive while the model works, and each way a call or the server can go wrong
ends the way its docstring (brain/worker/runner.py) says.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from brain.tests.stubs.local_model import (
    LocalReply,
    OllamaStub,
    OpenAIStub,
    local_error,
    local_garbage,
    local_hang,
    local_json,
    local_text,
    vector_for,
)
from brain.tests.stubs.messages import MessagesStub
from brain.worker import local
from brain.worker.__main__ import MIN_PYTHON, cleartext_warning

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "bin" / "brain"
TOKEN = "bw_test_token"
SCHEMA = {
    "type": "object",
    "properties": {"decision": {"type": "string"}},
    "required": ["decision"],
}


# A stand-in brain server --------------------------------------------------------------------


@dataclass
class Received:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeBrain:
    """The calls endpoints of a brain server, scripted: ``offer(call)`` queues a call for the
    next ``next``; ``statuses[path_end]`` lists statuses to answer instead of the normal one
    (each used once, e.g. ``{"answer": [409]}``)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    statuses: dict[str, list[tuple[int, dict]]] = field(default_factory=dict)
    lease_s: float = 60
    changed: threading.Condition = field(default_factory=threading.Condition)

    def offer(self, **call: Any) -> dict[str, Any]:
        number = len([r for r in self.received if r.path.endswith("/next")]) + len(self.calls)
        full = {
            "id": 100 + number,
            "lease": f"lease-{number}",
            "lease_expires_in": self.lease_s,
            "kind": "chat",
            "task": "reflect",
            "system": "You reflect.",
            "prompt": "What was said?",
            "max_tokens": 300,
            "schema": None,
            "texts": [],
            "deadline_in": 30,
            **call,
        }
        with self.changed:
            self.calls.append(full)
            self.changed.notify_all()
        return full

    def answers(self) -> list[Received]:
        return [r for r in self.received if r.path.endswith("/answer")]

    def heartbeats(self) -> list[Received]:
        return [r for r in self.received if r.path.endswith("/heartbeat")]

    def wait_for(self, condition, timeout: float = 15) -> None:
        """Until ``condition()``: woken by each request this server receives, and looking again
        every 20 ms for a condition on something else (a stub's requests)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not condition():
                left = deadline - time.monotonic()
                assert left > 0, f"not reached in {timeout} s; received {self.received}"
                self.changed.wait(min(left, 0.02))

    def handle(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        with self.changed:
            self.received.append(Received(path, body, headers))
            self.changed.notify_all()
            end = path.rsplit("/", 1)[-1]
            if self.statuses.get(end):
                return self.statuses[end].pop(0)
            if headers.get("authorization") != f"Bearer {TOKEN}":
                return 401, {"detail": "Invalid token."}
            if end == "next":
                deadline = time.monotonic() + min(float(body.get("wait", 20)), 2.0)
                while not self.calls and time.monotonic() < deadline:
                    self.changed.wait(deadline - time.monotonic())
                return (200, self.calls.pop(0)) if self.calls else (204, None)
            if end == "heartbeat":
                return 200, {"lease_expires_in": self.lease_s}
            return 200, {"accepted": True}


class _BrainHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        status, payload = self.server.brain.handle(
            self.path, json.loads(raw or b"{}"), {k.lower(): v for k, v in self.headers.items()}
        )
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the worker stopped while its long poll waited

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_brain(brain: FakeBrain, port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _BrainHandler)
    server.daemon_threads = True
    server.brain = brain  # type: ignore[attr-defined]
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server


@pytest.fixture
def brain() -> Iterator[tuple[FakeBrain, str]]:
    fake = FakeBrain()
    server = serve_brain(fake)
    yield fake, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


class WorkerProcess:
    """A `bin/brain worker` process; ``log`` is its stderr so far."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.log_path = Path(f"/tmp/w2-worker-{os.getpid()}-{time.monotonic_ns()}.log")
        self._log = self.log_path.open("w")
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("BRAIN_", "DJANGO_"))}
        self.process = subprocess.Popen(
            [str(WRAPPER), "worker", *args],
            env={**clean, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, text: str, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log:
            assert self.process.poll() is None or text in self.log, (
                f"exited {self.process.returncode} before {text!r}:\n{self.log}"
            )
            assert time.monotonic() < deadline, f"{text!r} not logged in {timeout} s:\n{self.log}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)
        self._log.close()
        self.log_path.unlink(missing_ok=True)


@pytest.fixture
def start_worker() -> Iterator[Any]:
    started: list[WorkerProcess] = []

    def start(
        server: str, endpoint: str, *extra: str, token: str | None = TOKEN, **kw
    ) -> WorkerProcess:
        args = ["--server", server, "--model", "llama3.2", "--endpoint", endpoint, "--wait", "2"]
        if token is not None:
            args += ["--token", token]
        worker = WorkerProcess(*args, *extra, **kw)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


# It needs nothing but Python -------------------------------------------------------------


def test_the_worker_program_needs_only_the_standard_library_and_never_imports_django():
    listed = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements-worker.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    # -I: no environment, no user site; -S: no site-packages at all (no venv, no Django).
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import brain.worker.__main__, brain.worker.runner, brain.worker.local;"
        "third = sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)"
        " - {'brain', '__main__'}); print(third)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert listed == []  # requirements-worker.txt names nothing, and nothing else is imported


def test_the_worker_program_is_written_for_python_3_10():
    package = sorted((ROOT / "brain" / "worker").glob("*.py"))
    for path in [*package, ROOT / "brain" / "__init__.py"]:
        ast.parse(path.read_text(), filename=str(path), feature_version=MIN_PYTHON)


def _interpreter(version: tuple[int, int]) -> str | None:
    """A Python of exactly ``version`` that runs on this machine (a pyenv shim may not)."""
    name = f"python{version[0]}.{version[1]}"
    candidates = [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/*/bin/{name}"))]
    candidates += [found for found in [shutil.which(name), f"/usr/bin/{name}"] if found]
    for candidate in candidates:
        try:
            ran = subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=30)
        except OSError:
            continue
        if ran.returncode == 0:
            return candidate
    return None


OLDEST = _interpreter(MIN_PYTHON)


@pytest.mark.skipif(OLDEST is None, reason="no Python 3.10 on this machine")
def test_the_worker_serves_a_call_on_the_oldest_python_it_supports(brain, ollama_stub):
    fake, url = brain
    ollama_stub.script(local_json({"decision": "keep"}))
    fake.offer(schema=SCHEMA)
    fake.offer(kind="embed", texts=["the loft"])
    process = subprocess.Popen(
        [OLDEST, "-E", "-S", "-m", "brain.worker", "--server", url, "--token", TOKEN,
         "--model", "llama3.2", "--endpoint", ollama_stub.base_url, "--wait", "1"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        fake.wait_for(lambda: len(fake.answers()) == 2)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)

    assert fake.answers()[0].body["text"] == '{"decision": "keep"}', err
    assert fake.answers()[1].body["vectors"] == [vector_for("the loft")]
    assert process.returncode == 0


def test_brain_worker_runs_without_the_projects_virtualenv(brain, ollama_stub, tmp_path):
    """On another machine: the repository's brain/ folder and a system Python, no .venv."""
    fake, url = brain
    copy = tmp_path / "checkout"
    (copy / "bin").mkdir(parents=True)
    (copy / "bin" / "brain").write_bytes(WRAPPER.read_bytes())
    (copy / "bin" / "brain").chmod(0o755)
    (copy / "brain").symlink_to(ROOT / "brain")
    ollama_stub.script(local_text("It was about the loft."))
    fake.offer()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).resolve().parent}:/usr/bin:/bin"
    process = subprocess.Popen(
        [
            str(copy / "bin" / "brain"),
            "worker",
            "--server",
            url,
            "--token",
            TOKEN,
            "--model",
            "llama3.2",
            "--endpoint",
            ollama_stub.base_url,
            "--wait",
            "1",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fake.wait_for(lambda: fake.answers())
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)

    assert fake.answers()[0].body["text"] == "It was about the loft.", err
    assert process.returncode == 0


@pytest.mark.parametrize(
    ("server", "warned"),
    [
        ("https://brain.example.org", False),
        ("http://127.0.0.1:8000", False),
        ("http://localhost:8000", False),
        ("http://[::1]:8000", False),
        ("http://brain.example.org", True),
        ("http://192.168.1.20:8000", True),
    ],
)
def test_plain_http_beyond_this_machine_is_warned_about(server, warned):
    assert (cleartext_warning(server) is not None) == warned


# The local model's two APIs ------------------------------------------------------------------


def test_the_api_is_found_by_asking_the_endpoint(ollama_stub, openai_stub):
    assert local.detect(ollama_stub.base_url) == "ollama"
    assert local.detect(openai_stub.base_url) == "openai"
    assert local.connect(endpoint=f"{openai_stub.base_url}/v1", model="m", api=None).api == "openai"


def test_an_endpoint_that_speaks_neither_api_is_named_with_what_it_answered():
    with MessagesStub() as other, pytest.raises(local.ModelFailed) as failed:
        local.detect(other.base_url)

    assert "speaks neither Ollama's API nor the OpenAI-compatible one" in str(failed.value)
    assert "GET /api/tags: HTTP 404; GET /v1/models: HTTP 404" in str(failed.value)


def test_a_local_model_that_is_not_running_is_said_in_one_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(local.ModelFailed) as failed:
        local.detect(f"http://127.0.0.1:{port}")

    assert str(failed.value) == (
        f"the local model at http://127.0.0.1:{port} did not answer: connection refused"
    )


def test_ollama_is_asked_without_streaming_with_the_token_limit_and_the_schema_as_format(
    ollama_stub,
):
    ollama_stub.script(local_json({"decision": "keep"}, input_tokens=31, output_tokens=9))
    model = local.OllamaAPI(endpoint=ollama_stub.base_url, model="llama3.2")

    answer = model.chat(
        system="Decide.", prompt="Keep it?", max_tokens=64, schema=SCHEMA, timeout=5
    )

    sent = ollama_stub.chats[0].body
    assert sent["stream"] is False
    assert sent["options"] == {"num_predict": 64}
    assert sent["format"] == SCHEMA
    assert sent["messages"] == [
        {"role": "system", "content": "Decide."},
        {"role": "user", "content": "Keep it?"},
    ]
    assert answer.wire() == {"text": '{"decision": "keep"}', "input_tokens": 31, "output_tokens": 9}


def test_ollama_without_a_schema_is_asked_for_free_text():
    with OllamaStub() as stub:
        stub.script(local_text("Fine."))
        local.OllamaAPI(endpoint=stub.base_url, model="m").chat(
            system="", prompt="Hi", max_tokens=5, schema=None, timeout=5
        )

    assert "format" not in stub.chats[0].body
    assert stub.chats[0].body["messages"] == [{"role": "user", "content": "Hi"}]


def test_the_openai_api_is_asked_for_a_json_schema_response_format(openai_stub):
    openai_stub.script(local_json({"decision": "drop"}, input_tokens=20, output_tokens=4))
    model = local.OpenAIAPI(endpoint=openai_stub.base_url, model="qwen")

    answer = model.chat(
        system="Decide.", prompt="Drop it?", max_tokens=80, schema=SCHEMA, timeout=5
    )

    sent = openai_stub.chats[0].body
    assert sent["max_tokens"] == 80
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
    assert answer.wire() == {"text": '{"decision": "drop"}', "input_tokens": 20, "output_tokens": 4}


@pytest.mark.parametrize("stub_class", [OllamaStub, OpenAIStub])
def test_embeddings_come_back_one_vector_per_text_in_order(stub_class):
    with stub_class() as stub:
        model = local.APIS[stub.api](endpoint=stub.base_url, model="nomic-embed-text")
        answer = model.embed(texts=["the loft", "the cellar"], timeout=5)

    assert answer.wire() == {"vectors": [vector_for("the loft"), vector_for("the cellar")]}
    assert stub.embeds[0].body == {"model": "nomic-embed-text", "input": ["the loft", "the cellar"]}


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (local_error(404, 'model "llama3.2" not found'), 'HTTP 404: model "llama3.2" not found'),
        (local_garbage("<html>Bad gateway</html>"), "not a JSON object: <html>Bad gateway</html>"),
        (LocalReply(raw='{"message": {}}'), "no message.content in the local model's answer"),
    ],
)
def test_a_local_model_failure_is_one_line_saying_what_came_back(ollama_stub, reply, said):
    ollama_stub.script(reply)
    model = local.OllamaAPI(endpoint=ollama_stub.base_url, model="llama3.2")

    with pytest.raises(local.ModelFailed) as failed:
        model.chat(system="", prompt="Hi", max_tokens=5, schema=None, timeout=5)

    assert said in str(failed.value)


def test_too_few_vectors_for_the_texts_is_a_failure_not_a_short_answer(openai_stub):
    openai_stub.script_embed(LocalReply(vectors=[[0.1, 0.2]]))
    model = local.OpenAIAPI(endpoint=openai_stub.base_url, model="e")

    with pytest.raises(local.ModelFailed) as failed:
        model.embed(texts=["a", "b"], timeout=5)

    assert str(failed.value) == "the local model gave 1 embeddings for 2 texts"


# The program against a brain server --------------------------------------------------------


def test_a_call_is_run_on_the_local_model_and_its_answer_posted_with_one_line_in_the_log(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    ollama_stub.script(local_json({"decision": "keep"}, input_tokens=50, output_tokens=6))
    call = fake.offer(task="consolidate", schema=SCHEMA, system="S", prompt="P", max_tokens=99)
    worker = start_worker(url, ollama_stub.base_url, "--name", "attic-pc")

    fake.wait_for(lambda: fake.answers())
    worker.wait_for_log(f"call {call['id']} consolidate chat:")
    status = worker.stop()

    first_next = next(r for r in fake.received if r.path.endswith("/next"))
    assert first_next.body == {"worker": "attic-pc", "models": ["llama3.2"], "wait": 2.0}
    assert first_next.headers["authorization"] == f"Bearer {TOKEN}"
    assert fake.answers()[0].path == f"/api/worker/calls/{call['id']}/answer"
    assert fake.answers()[0].body == {
        "lease": call["lease"],
        "text": '{"decision": "keep"}',
        "input_tokens": 50,
        "output_tokens": 6,
    }
    assert ollama_stub.chats[0].body["format"] == SCHEMA
    assert ollama_stub.chats[0].body["options"] == {"num_predict": 99}
    line = next(line for line in worker.log.splitlines() if f"call {call['id']}" in line)
    assert line.endswith(" ms)") and " ms answered (model " in line
    assert status == 0
    assert worker.log.rstrip().endswith("stopped after 1 call")


def test_an_embed_call_posts_the_vectors(brain, openai_stub, start_worker):
    fake, url = brain
    call = fake.offer(kind="embed", task="embed", texts=["the loft is warm"], prompt="", system="")
    start_worker(url, openai_stub.base_url)

    fake.wait_for(lambda: fake.answers())

    assert fake.answers()[0].body == {
        "lease": call["lease"],
        "vectors": [vector_for("the loft is warm")],
    }


def test_a_model_error_is_posted_as_the_calls_error(brain, ollama_stub, start_worker):
    fake, url = brain
    ollama_stub.script(local_error(500, "CUDA out of memory"))
    call = fake.offer()
    worker = start_worker(url, ollama_stub.base_url)

    fake.wait_for(lambda: fake.answers())

    assert fake.answers()[0].body == {
        "lease": call["lease"],
        "error": "the local model answered HTTP 500: CUDA out of memory",
    }
    worker.wait_for_log("model failed, posted as the call's error")


@pytest.mark.parametrize("stub_class", [OllamaStub, OpenAIStub])
def test_a_json_answer_cut_off_at_the_token_limit_is_posted_as_that_error(
    brain, start_worker, stub_class
):
    fake, url = brain
    with stub_class() as stub:
        stub.script(local_text('{"decision": "ke', finish="length"))
        call = fake.offer(schema=SCHEMA, max_tokens=8)
        start_worker(url, stub.base_url)

        fake.wait_for(lambda: fake.answers())

    assert fake.answers()[0].body == {
        "lease": call["lease"],
        "error": "the answer was cut off at max_tokens (8) before it was complete",
    }


def test_free_text_cut_off_at_the_token_limit_is_still_an_answer(brain, ollama_stub, start_worker):
    fake, url = brain
    ollama_stub.script(local_text("The loft is", finish="length"))
    fake.offer(schema=None)
    start_worker(url, ollama_stub.base_url)

    fake.wait_for(lambda: fake.answers())

    assert fake.answers()[0].body["text"] == "The loft is"


def test_the_lease_is_kept_alive_while_a_slow_model_works(brain, ollama_stub, start_worker):
    fake, url = brain
    ollama_stub.script(LocalReply(text="slow but there", hang_s=2.0))
    fake.lease_s = 0.9
    call = fake.offer(lease_expires_in=fake.lease_s)
    start_worker(url, ollama_stub.base_url)

    fake.wait_for(lambda: fake.answers())

    beats = fake.heartbeats()
    assert len(beats) >= 4  # every 0.3 s for 2 s
    assert {b.path for b in beats} == {f"/api/worker/calls/{call['id']}/heartbeat"}
    assert {b.body["lease"] for b in beats} == {call["lease"]}
    assert fake.answers()[0].body["text"] == "slow but there"


def test_an_answer_refused_for_a_lost_lease_is_logged_and_the_next_call_is_served(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    fake.statuses["answer"] = [(409, {"detail": "This call was handed to another worker."})]
    ollama_stub.script(local_text("first"), local_text("second"))
    first, second = fake.offer(), fake.offer()
    worker = start_worker(url, ollama_stub.base_url)

    fake.wait_for(lambda: len(fake.answers()) == 2)
    worker.wait_for_log(f"call {second['id']}")

    assert [a.body["text"] for a in fake.answers()] == ["first", "second"]
    assert (
        "not used, the lease was no longer ours (This call was handed to another worker.)"
        in next(line for line in worker.log.splitlines() if f"call {first['id']}" in line)
    )
    assert worker.process.poll() is None


def test_a_worker_whose_token_is_unknown_stops_at_once_with_a_message_saying_so(
    brain, ollama_stub, start_worker
):
    _, url = brain
    worker = start_worker(url, ollama_stub.base_url, token="bw_wrong")

    assert worker.process.wait(timeout=15) == 3
    assert "the server does not know this worker token (HTTP 401: Invalid token.)" in worker.log


def test_a_server_address_with_a_path_after_it_is_said_to_be_wrong(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    fake.statuses["next"] = [
        (403, {"detail": "A worker token may only take and answer model calls."})
    ]
    worker = start_worker(f"{url}/knowledge", ollama_stub.base_url)

    assert worker.process.wait(timeout=15) == 3
    assert "--server must be the address brain is served at" in worker.log
    assert fake.received[0].path == "/knowledge/api/worker/calls/next"


def test_a_revoked_token_mid_call_gets_the_answer_refused_and_the_worker_stops_saying_why(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    fake.statuses["answer"] = [(403, {"detail": "This worker token was revoked."})]
    ollama_stub.script(local_text("too late"))
    call = fake.offer()
    worker = start_worker(url, ollama_stub.base_url)

    assert worker.process.wait(timeout=15) == 3
    assert len(fake.answers()) == 1
    assert (
        f"call {call['id']} reflect chat: answer refused: the server refused this worker token "
        "(HTTP 403: This worker token was revoked.)" in worker.log
    )
    assert "ask an administrator for a new one" in worker.log


def test_the_token_can_come_from_the_environment_so_it_is_not_in_the_process_list(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    start_worker(url, ollama_stub.base_url, token=None, env={"BRAIN_WORKER_TOKEN": TOKEN})

    fake.wait_for(lambda: any(r.path.endswith("/next") for r in fake.received))

    assert fake.received[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_server_that_is_down_is_tried_until_it_comes_back_said_once_each_way(
    ollama_stub, start_worker
):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ollama_stub.script(local_text("back"))
    worker = start_worker(f"http://127.0.0.1:{port}", ollama_stub.base_url)
    worker.wait_for_log("the server is not answering (connection refused)")
    time.sleep(2)  # several attempts

    fake = FakeBrain()
    server = serve_brain(fake, port)
    try:
        fake.offer()
        fake.wait_for(lambda: fake.answers(), timeout=20)
        worker.wait_for_log("the server is answering again")
        said = worker.log  # before the server goes away again as the test ends
    finally:
        server.shutdown()
        server.server_close()

    assert said.count("is not answering") == 1
    assert said.count("is answering again") == 1


def test_a_server_error_backs_off_and_is_tried_again(brain, ollama_stub, start_worker):
    fake, url = brain
    fake.statuses["next"] = [(502, {"detail": "Bad gateway"})] * 2
    ollama_stub.script(local_text("ok"))
    fake.offer()
    worker = start_worker(url, ollama_stub.base_url)

    fake.wait_for(lambda: fake.answers())

    assert "the server is not answering (HTTP 502: Bad gateway)" in worker.log
    nexts = [r for r in fake.received if r.path.endswith("/next")]
    assert len(nexts) >= 3


def test_a_proxy_cutting_the_long_poll_short_is_named_with_what_to_do(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    fake.statuses["next"] = [(504, {"detail": "Gateway Time-out"})]
    worker = start_worker(url, ollama_stub.base_url, "--wait", "20")

    worker.wait_for_log("is answering again")

    assert (
        "the server is not answering (HTTP 504: Gateway Time-out; a proxy in front of the server "
        "may end requests sooner than --wait (20 s): if this repeats, try a lower --wait)"
    ) in worker.log


def test_sigterm_while_waiting_for_a_call_stops_at_once_with_status_0(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    worker = start_worker(url, ollama_stub.base_url)
    fake.wait_for(lambda: any(r.path.endswith("/next") for r in fake.received))

    started = time.monotonic()
    assert worker.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 2
    assert "stopped after 0 calls" in worker.log


def test_sigterm_while_serving_finishes_the_call_posts_it_then_stops(
    brain, ollama_stub, start_worker
):
    fake, url = brain
    ollama_stub.script(LocalReply(text="finished", hang_s=1.5))
    fake.offer()
    worker = start_worker(url, ollama_stub.base_url)
    fake.wait_for(lambda: ollama_stub.chats)

    assert worker.stop(signal.SIGTERM) == 0
    assert [a.body["text"] for a in fake.answers()] == ["finished"]
    assert "SIGTERM: finishing the call in hand, then stopping" in worker.log


def test_a_second_signal_abandons_the_call_posting_nothing(brain, ollama_stub, start_worker):
    fake, url = brain
    ollama_stub.script(local_hang(30))
    call = fake.offer()
    worker = start_worker(url, ollama_stub.base_url)
    fake.wait_for(lambda: ollama_stub.chats)

    worker.process.send_signal(signal.SIGINT)
    worker.wait_for_log("finishing the call in hand")
    assert worker.stop(signal.SIGINT) == 0
    assert fake.answers() == []
    assert f"call {call['id']} reflect chat:" in worker.log
    assert "abandoned (stopping): its lease runs out for another worker" in worker.log


def test_a_local_model_not_there_at_start_is_waited_for(brain, start_worker):
    fake, url = brain
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = start_worker(url, f"http://127.0.0.1:{port}")
    worker.wait_for_log("the local model is not answering")

    assert not any(r.path.endswith("/next") for r in fake.received)  # takes no call it can't run
    assert worker.process.poll() is None
