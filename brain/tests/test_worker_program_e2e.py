"""A real `brain worker` process against the live test server and a stub local model on
loopback: what a household running a worker on its own machine sees, each failure included.

The server is pytest-django's ``live_server`` (in this process, on the test database, so
``settings`` changes such as a short lease apply to it); each worker is `bin/brain worker` in a
process of its own, as a person starts it. Calls are made the way the gateway makes them
(``ask``: a waiting call, then the wait for its answer); the jobs that make them are in
test_worker_program_jobs.py.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pydantic
import pytest
from django.utils import timezone

from brain import workers
from brain.models import WaitingCall, Worker
from brain.testing import wait_until
from brain.tests.stubs.local_model import LocalReply, local_hang, local_json, local_text
from brain.tests.test_worker_program import WorkerProcess


class Decision(pydantic.BaseModel):
    decision: str
    reason: str


DECISION = f"{__name__}.Decision"


@pytest.fixture
def memory(transactional_db):
    """The default memory, committed: the worker's server reads it from other threads."""
    from knowledge.models import Memory

    return Memory.objects.default()


@pytest.fixture
def key(memory) -> str:
    return workers.create_token(memory=memory, name="attic machine").key


@pytest.fixture
def start_worker(live_server) -> Iterator[Any]:
    started: list[WorkerProcess] = []

    def start(stub, name: str, token: str, *extra: str) -> WorkerProcess:
        worker = WorkerProcess(
            "--server", live_server.url, "--token", token, "--model", "llama3.2",
            "--endpoint", stub.base_url, "--name", name, "--wait", "5", *extra,
        )  # fmt: skip
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


def ask(memory, *, task: str = "reflect", seconds: float = 30, **fields: Any) -> WaitingCall:
    """A chat call waiting for a worker, as the gateway writes it (asking for a Decision)."""
    values: dict[str, Any] = {
        "kind": WaitingCall.Kind.CHAT,
        "system": "Decide whether to keep the line. Answer with one JSON object.",
        "prompt": "The loft is warm.",
        "max_tokens": 200,
        "schema": Decision.model_json_schema(),
        "output_class": DECISION,
        **fields,
    }
    call = WaitingCall.objects.create(
        memory=memory, task=task, deadline=timezone.now() + timedelta(seconds=seconds), **values
    )
    workers.notify(workers.calls_channel(memory.pk))
    return call


def settled(call: WaitingCall, timeout: float = 30) -> WaitingCall:
    """The call once it is answered or failed."""
    return wait_until(
        lambda: (
            WaitingCall.objects.exclude(state__in=["waiting", "leased"]).filter(pk=call.pk).first()
        ),
        timeout=timeout,
        message=f"call {call.pk} was not settled",
    )


KEEP = local_json({"decision": "keep", "reason": "It is new."})


def test_a_call_is_served_end_to_end_and_the_worker_page_counts_it(
    memory, key, ollama_stub, start_worker
):
    ollama_stub.script(KEEP)
    call = ask(memory)
    worker = start_worker(ollama_stub, "attic", key)

    call = settled(call)

    assert call.state == "answered"
    assert json.loads(call.text) == {"decision": "keep", "reason": "It is new."}
    assert (call.worker_name, call.attempts, call.input_tokens) == ("attic", 1, 120)
    sent = ollama_stub.chats[0].body
    assert sent["messages"][0]["content"].startswith("Decide whether to keep the line.")
    assert sent["messages"][1] == {"role": "user", "content": "The loft is warm."}
    assert sent["format"] == Decision.model_json_schema()
    seen = Worker.objects.get(name="attic")
    assert (seen.served, seen.last_task, seen.models_served) == (1, "reflect", ["llama3.2"])
    worker.wait_for_log(f"call {call.pk} reflect chat:")


def test_a_worker_killed_holding_a_call_leaves_it_to_a_second_worker(
    memory, key, ollama_stub, openai_stub, start_worker, settings
):
    settings.BRAIN_WORKER_LEASE_S = 2
    ollama_stub.script(local_hang(60))
    openai_stub.script(local_json({"decision": "drop", "reason": "Said before."}))
    call = ask(memory)
    first = start_worker(ollama_stub, "first", key)
    wait_until(lambda: ollama_stub.chats, timeout=30, message="the first worker never asked")
    first.process.kill()  # SIGKILL: no goodbye, its lease just stops being renewed
    first.process.wait(timeout=5)

    start_worker(openai_stub, "second", key)
    call = settled(call)

    assert call.state == "answered"
    assert (call.worker_name, call.attempts) == ("second", 2)
    assert json.loads(call.text)["decision"] == "drop"
    assert len(ollama_stub.chats) == 1 and len(openai_stub.chats) == 1


def test_two_workers_racing_for_each_call_serve_it_exactly_once(
    memory, key, ollama_stub, openai_stub, start_worker
):
    ollama_stub.script(local_json({"decision": "keep", "reason": "ollama"}))
    openai_stub.script(local_json({"decision": "keep", "reason": "openai"}))
    start_worker(ollama_stub, "left", key)
    start_worker(openai_stub, "right", key)
    wait_until(lambda: Worker.objects.count() == 2, timeout=30, message="both workers asking")

    calls = []
    for _ in range(6):
        time.sleep(0.3)  # both long-polls waiting again
        calls.append(settled(ask(memory)))

    assert {call.state for call in calls} == {"answered"}
    assert [call.attempts for call in calls] == [1] * 6
    assert len(ollama_stub.chats) + len(openai_stub.chats) == 6  # no call asked twice
    by_worker = {w.name: w.served for w in Worker.objects.all()}
    assert sum(by_worker.values()) == 6
    for call in calls:
        assert (
            json.loads(call.text)["reason"]
            == {"left": "ollama", "right": "openai"}[call.worker_name]
        )


def test_a_worker_frozen_past_its_lease_has_its_late_answer_refused_and_one_answer_is_used(
    memory, key, ollama_stub, openai_stub, start_worker, settings
):
    settings.BRAIN_WORKER_LEASE_S = 2
    ollama_stub.script(local_json({"decision": "keep", "reason": "late"}, hang_s=1))
    openai_stub.script(local_json({"decision": "drop", "reason": "on time"}))
    call = ask(memory)
    first = start_worker(ollama_stub, "first", key)
    wait_until(lambda: ollama_stub.chats, timeout=30, message="the first worker never asked")
    first.process.send_signal(signal.SIGSTOP)  # frozen: no heartbeats, its lease runs out

    start_worker(openai_stub, "second", key)
    call = settled(call)
    first.process.send_signal(signal.SIGCONT)
    first.wait_for_log(f"call {call.pk} reflect chat:")

    assert (call.worker_name, call.attempts) == ("second", 2)
    assert json.loads(call.text)["reason"] == "on time"
    assert "not used, the lease was no longer ours" in first.log
    call.refresh_from_db()
    assert json.loads(call.text)["reason"] == "on time"  # the late answer changed nothing
    assert first.process.poll() is None  # and the first worker goes on serving


def test_a_garbage_answer_is_refused_retried_once_on_another_lease_then_fails_with_its_reason(
    memory, key, ollama_stub, start_worker
):
    ollama_stub.script(local_text("Sure! The loft is warm, keep it."), local_json({"decision": 3}))
    call = ask(memory)
    worker = start_worker(ollama_stub, "attic", key)

    call = settled(call)

    assert call.state == "failed"
    assert call.attempts == 2  # two leases
    assert call.bad_answers == 2
    assert call.error.startswith("The answer does not match Decision: decision:")
    assert len(ollama_stub.chats) == 2
    worker.wait_for_log("refused by the server (HTTP 422: The answer is not JSON")
    worker.wait_for_log("The call has failed with this reason.")
    assert worker.process.poll() is None  # a refused answer is no reason to stop


def test_a_model_that_fails_twice_fails_the_call_naming_the_models_error(
    memory, key, openai_stub, start_worker
):
    openai_stub.script(LocalReply(status=500, error="model llama3.2 is loading"))
    call = ask(memory)
    start_worker(openai_stub, "attic", key)

    call = settled(call)

    assert call.state == "failed"
    assert call.error == (
        "The worker's model failed: the local model answered HTTP 500: model llama3.2 is loading"
    )


def test_an_embed_call_gets_one_vector_per_text(memory, key, ollama_stub, start_worker):
    call = ask(
        memory,
        task="embed",
        kind=WaitingCall.Kind.EMBED,
        texts=["The loft is warm.", "The cellar is damp."],
        schema={"dimensions": 384},
        output_class="",
        system="",
        prompt="",
    )
    start_worker(ollama_stub, "attic", key)

    call = settled(call)

    assert call.state == "answered"
    assert [len(vector) for vector in call.vectors] == [384, 384]
    assert ollama_stub.embeds[0].body["input"] == ["The loft is warm.", "The cellar is damp."]


def test_a_revoked_token_mid_call_has_its_answer_refused_and_the_worker_stops_saying_why(
    memory, key, ollama_stub, start_worker
):
    ollama_stub.script(LocalReply(text=KEEP.text, hang_s=2))
    call = ask(memory)
    worker = start_worker(ollama_stub, "attic", key)
    wait_until(lambda: ollama_stub.chats, timeout=30, message="the worker never asked its model")

    workers.revoke_token(workers.token_for_key(key))

    assert worker.process.wait(timeout=30) == 3
    call.refresh_from_db()
    # Nothing of its answer was taken, and the call waits for a worker with a live token.
    assert (call.state, call.text, call.lease) == ("waiting", "", "")
    assert "answer refused: the server refused this worker token (HTTP 403: This worker token " \
        "was revoked.)" in worker.log  # fmt: skip


def test_a_revoked_token_stops_a_waiting_worker_too(memory, key, ollama_stub, start_worker):
    worker = start_worker(ollama_stub, "attic", key)
    wait_until(lambda: Worker.objects.exists(), timeout=30, message="the worker never asked")

    workers.revoke_token(workers.token_for_key(key))

    assert worker.process.wait(timeout=30) == 3
    assert "This worker token was revoked." in worker.log


def test_a_call_past_its_deadline_is_never_handed_out(memory, key, ollama_stub, start_worker):
    late = ask(memory, seconds=0.5)
    time.sleep(0.6)
    ollama_stub.script(KEEP)
    start_worker(ollama_stub, "attic", key)
    wait_until(lambda: Worker.objects.exists(), timeout=30, message="the worker never asked")
    fresh = settled(ask(memory))

    assert fresh.state == "answered"
    late.refresh_from_db()
    assert late.state == "waiting" and late.attempts == 0
    assert len(ollama_stub.chats) == 1


def test_sigterm_while_serving_finishes_the_call_and_its_answer_is_used(
    memory, key, ollama_stub, start_worker
):
    ollama_stub.script(LocalReply(text=KEEP.text, hang_s=1.5))
    call = ask(memory)
    worker = start_worker(ollama_stub, "attic", key)
    wait_until(lambda: ollama_stub.chats, timeout=30, message="the worker never asked its model")

    assert worker.stop(signal.SIGTERM, timeout=30) == 0
    call.refresh_from_db()
    assert call.state == "answered"


# A worker token is worth nothing anywhere else --------------------------------------------------

OTHER_ADDRESSES = [
    ("GET", "/api/facts/"),
    ("GET", "/api/facts/1/"),
    ("POST", "/api/context"),
    ("GET", "/api/memory/"),  # the document
    ("POST", "/api/memory/add"),
    ("GET", "/api/memory/export"),
    ("GET", "/api/memory/inbox"),
    ("POST", "/api/memory/consolidate"),
    ("GET", "/api/schema/"),
    ("GET", "/admin/"),
    ("GET", "/admin/brain/workertoken/"),
    ("GET", "/knowledge/"),
    ("GET", "/"),
    # MCP is served on stdio only (`brain mcp`): there is no MCP address over HTTP to try.
]


@pytest.mark.parametrize("scheme", ["Bearer", "Token"])
def test_a_worker_token_is_refused_by_every_other_address_of_the_real_server(
    memory, key, live_server, scheme
):
    refused = {}
    for method, path in OTHER_ADDRESSES:
        request = urllib.request.Request(
            live_server.url + path,
            method=method,
            data=b"{}" if method == "POST" else None,
            headers={"Authorization": f"{scheme} {key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                refused[path] = (answer.status, answer.read().decode())
        except urllib.error.HTTPError as error:
            refused[path] = (error.code, json.loads(error.read())["detail"])

    assert refused == {
        path: (403, "A worker token may only take and answer model calls.")
        for _, path in OTHER_ADDRESSES
    }
