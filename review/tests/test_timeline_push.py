"""Learning you can see from outside the panel: brain_learned and brain_finding are recorded on the
timeline and pushed to Home Assistant (a stub server here) as events and sensor states."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from brain.celery import app as celery_app
from knowledge.models import Memory, Subject
from memory.actions import learn
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses
from review import tasks, timeline
from review.models import Event

TOKEN = "a-long-lived-access-token"
SENSORS = [
    "/api/states/binary_sensor.brain_memory_waiting_on_you",
    "/api/states/sensor.brain_memory_facts_learned",
    "/api/states/sensor.brain_memory_last_learned",
    "/api/states/sensor.brain_findings_open_findings",
]


class _HomeAssistant(BaseHTTPRequestHandler):
    """Records every POST; answers 401 to a wrong token, else the status the test chose."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self.server.received.append((self.path, body))
        authorised = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        self.send_response(self.server.answer if authorised else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def home_assistant(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HomeAssistant)
    server.received, server.answer = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.HA_URL = f"http://127.0.0.1:{server.server_address[1]}/"
    settings.HA_TOKEN = TOKEN
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """The events whose push_event message was sent, instead of sending them to a broker."""
    sent: list[int] = []

    def send_task(name: str, args: list) -> None:
        assert name == "review.tasks.push_event"
        sent.append(*args)

    monkeypatch.setattr(celery_app, "send_task", send_task)
    return sent


def _paths(server) -> list[str]:
    return [path for path, _ in server.received]


def _state(server, path: str) -> dict:
    return next(body for sent, body in server.received if sent == path)


def _raise_leak(home: Memory):
    Subject.objects.create(
        memory=home, kind=Subject.Kind.DEVICE, name="Sink leak", entity_id="binary_sensor.sink"
    )
    return review_findings.raise_finding(
        memory=home,
        check_id="leak",
        entity_id="binary_sensor.sink",
        severity="high",
        text="Water under the kitchen sink",
    )


def test_learning_a_fact_records_brain_learned_and_pushes_it_with_the_sensors(
    home, home_assistant, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        learn(
            Statement.typed(
                memory=home, text="The hallway sensor drops offline around 2am", origin="typed"
            )
        )
    event = Event.objects.get()
    assert (event.kind, event.text) == (
        "brain_learned",
        "brain learned: The hallway sensor drops offline around 2am",
    )

    timeline.push(event)

    assert _paths(home_assistant) == ["/api/events/brain_learned", *SENSORS]
    assert home_assistant.received[0][1]["text"] == event.text
    assert _state(home_assistant, SENSORS[1]) == {"state": 1, "attributes": {}}
    last = _state(home_assistant, SENSORS[2])
    assert last["attributes"]["text"] == "The hallway sensor drops offline around 2am"
    assert last["state"] is not None
    assert _state(home_assistant, SENSORS[0])["state"] == "off"
    event.refresh_from_db()
    assert event.pushed_at is not None


def test_raising_a_finding_records_brain_finding_and_pushes_it_with_the_sensors(
    home, home_assistant, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        raised = _raise_leak(home)
    event = Event.objects.get()
    assert (event.kind, event.text) == ("brain_finding", "Water under the kitchen sink")

    timeline.push(event)

    assert _paths(home_assistant) == ["/api/events/brain_finding", *SENSORS]
    assert home_assistant.received[0][1] == {
        "text": "Water under the kitchen sink",
        "finding": raised.finding.pk,
        "severity": "high",
    }
    assert _state(home_assistant, SENSORS[3]) == {
        "state": 1,
        "attributes": {
            "severity": {"high": 1, "medium": 0, "low": 0},
            "findings": [
                {
                    "id": raised.finding.pk,
                    "severity": "high",
                    "text": "Water under the kitchen sink",
                }
            ],
        },
    }


def test_a_guess_waiting_on_you_turns_the_binary_sensor_on_with_its_id(
    home, home_assistant, queued
):
    guess = review_guesses.propose_guess(
        memory=home, text="The garage fridge is meant to run 24/7"
    ).guess
    assert guess.question == "The garage fridge is meant to run 24/7 — right?"
    raised = _raise_leak(home)
    event = Event.objects.get(data__finding=raised.finding.pk)

    timeline.push(event)

    assert _state(home_assistant, SENSORS[0]) == {
        "state": "on",
        "attributes": {
            "guesses": [
                {"id": guess.pk, "question": "The garage fridge is meant to run 24/7 — right?"}
            ]
        },
    }


def test_a_push_is_sent_after_commit_and_only_when_home_assistant_is_configured(
    home, home_assistant, queued, settings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        _raise_leak(home)
        assert queued == []  # nothing leaves before the row is committed

    for callback in callbacks:
        callback()
    assert queued == [Event.objects.get().pk]

    settings.HA_URL = ""
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        learn(Statement.typed(memory=home, text="Guests use the loft", origin="typed"))

    assert Event.objects.filter(kind="brain_learned").count() == 1  # recorded all the same
    assert queued == [Event.objects.get(kind="brain_finding").pk]


def test_an_error_from_home_assistant_raises_so_the_task_retries_and_nothing_is_marked_pushed(
    home, home_assistant, queued
):
    _raise_leak(home)
    event = Event.objects.get()
    home_assistant.answer = 500

    with pytest.raises(httpx2.HTTPStatusError) as error:
        timeline.push(event)

    assert isinstance(error.value, tasks.push_event.autoretry_for)
    event.refresh_from_db()
    assert event.pushed_at is None
    with pytest.raises(httpx2.HTTPStatusError):
        tasks.push_event(event.pk)  # called directly, the retry re-raises


def test_a_wrong_token_is_refused_and_nothing_is_marked_pushed(
    home, home_assistant, queued, settings
):
    _raise_leak(home)
    event = Event.objects.get()
    settings.HA_TOKEN = "not-the-token"

    with pytest.raises(httpx2.HTTPStatusError, match="401"):
        timeline.push(event)

    event.refresh_from_db()
    assert event.pushed_at is None


def test_the_task_sends_an_event_once_and_skips_one_already_pushed_or_gone(
    home, home_assistant, queued
):
    _raise_leak(home)
    event = Event.objects.get()

    tasks.push_event(event.pk)
    tasks.push_event(event.pk)
    tasks.push_event(event.pk + 1000)

    assert _paths(home_assistant) == ["/api/events/brain_finding", *SENSORS]
