"""The entity registry: rooms, devices and people from a file or from Home Assistant."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from django.core.management import CommandError, call_command

from knowledge import registry, tasks
from knowledge.models import Fact, Memory, Subject
from knowledge.subjects import resolve
from memory.actions import learn
from memory.taught import Statement

EXAMPLE = {
    "house": "Home",
    "rooms": [
        {"name": "Office", "aliases": ["The Study Upstairs", "the study  upstairs"]},
        {"name": "Hall"},
    ],
    "devices": [
        {
            "entity_id": "light.office_lamp",
            "name": "Office lamp",
            "room": "Office",
            "aliases": ["The Beacon"],
        },
        {"entity_id": "sensor.hall_battery", "name": "Hall sensor", "room": "Hall"},
    ],
    "people": [{"name": "Sarah", "aliases": []}],
}
FLICKER = "The office lamp flickers when the heater runs."
TOKEN = "a-long-lived-token"
STATES = [
    {
        "entity_id": "light.office_lamp",
        "state": "on",
        "attributes": {"friendly_name": "Office lamp", "area": "Office"},
    },
    {
        "entity_id": "sensor.hall_battery",
        "state": "12",
        "attributes": {"friendly_name": "Hall sensor battery", "unit_of_measurement": "%"},
    },
    {"entity_id": "person.sarah", "state": "home", "attributes": {"friendly_name": "Sarah"}},
    {"entity_id": "sun.sun", "state": "above_horizon", "attributes": {"friendly_name": "Sun"}},
    {"entity_id": "zone.home", "state": "1", "attributes": {"friendly_name": "Home"}},
]


@pytest.fixture
def write(tmp_path):
    """Write a registry document to a file (JSON or YAML by suffix); returns its path."""

    def write(document, name: str = "house.json"):
        path = tmp_path / name
        if isinstance(document, str):
            path.write_text(document)
        elif name.endswith(".json"):
            path.write_text(json.dumps(document))
        else:
            path.write_text(yaml.safe_dump(document))
        return path

    return write


def entities(*args: str) -> str:
    """Run `brain entities ARGS` in this process; returns what it printed."""
    out = io.StringIO()
    call_command("entities", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def without(device: str) -> dict:
    return {**EXAMPLE, "devices": [d for d in EXAMPLE["devices"] if d["entity_id"] != device]}


def live_texts(memory: Memory) -> list[str]:
    return list(Fact.objects.for_memory(memory).live().values_list("text", flat=True))


def snapshot(memory: Memory) -> list[tuple]:
    return list(
        Subject.objects.for_memory(memory)
        .order_by("pk")
        .values_list("kind", "name", "entity_id", "room__name", "aliases", "present")
    )


# Loading a file -------------------------------------------------------------------------------


def test_loading_the_example_file_creates_the_subjects_with_their_nicknames(home, write):
    printed = entities("load", str(write(EXAMPLE)))

    assert printed == "house.json: 6 added, 0 updated, 0 removed, 0 returned, 0 unchanged.\n"
    assert resolve(home, ["the beacon"]) == resolve(home, ["light.office_lamp"])
    lamp = Subject.objects.get(entity_id="light.office_lamp")
    assert (lamp.kind, lamp.name, lamp.room.name, lamp.aliases) == (
        "device",
        "Office lamp",
        "Office",
        ["the beacon"],
    )
    assert Subject.objects.get(name="Office").aliases == ["the study upstairs"]
    assert resolve(home, ["Sarah"])[0].kind == "person"
    assert resolve(home, ["Home"])[0].kind == "house"


def test_a_yaml_file_loads_the_same_subjects_as_json(home, write):
    entities("load", str(write(EXAMPLE, "house.yaml")))
    from_yaml = snapshot(home)
    Subject.objects.all().delete()

    entities("load", str(write(EXAMPLE, "house.json")))

    assert [row[1:] for row in snapshot(home)] == [row[1:] for row in from_yaml]


def test_loading_the_same_file_twice_changes_nothing(home, write):
    path = write(EXAMPLE)
    entities("load", str(path))
    before = snapshot(home)

    printed = entities("load", str(path))

    assert printed == "house.json: 0 added, 0 updated, 0 removed, 0 returned, 6 unchanged.\n"
    assert snapshot(home) == before


def test_a_device_missing_from_the_next_load_is_gone_and_its_facts_stop_being_used(home, write):
    entities("load", str(write(EXAMPLE)))
    learn(Statement.typed(memory=home, text=FLICKER, origin="typed"))
    assert live_texts(home) == [FLICKER]

    printed = entities("load", str(write(without("light.office_lamp"))))

    assert "1 removed" in printed
    assert "No longer in the house: Office lamp" in printed
    assert live_texts(home) == []
    lamp = Subject.objects.get(entity_id="light.office_lamp")
    assert not lamp.present and lamp.removed_at is not None
    assert "(gone; its facts are deleted on " in entities("list")


def test_a_device_that_reappears_brings_its_facts_back(home, write):
    entities("load", str(write(EXAMPLE)))
    learn(Statement.typed(memory=home, text=FLICKER, origin="typed"))
    entities("load", str(write(without("light.office_lamp"))))

    printed = entities("load", str(write(EXAMPLE)))

    assert "1 returned" in printed
    assert "Back again, with their facts: Office lamp." in printed
    assert live_texts(home) == [FLICKER]
    assert Subject.objects.get(entity_id="light.office_lamp").removed_at is None


def test_rooms_and_people_left_out_of_a_file_are_kept(home, write):
    entities("load", str(write(EXAMPLE)))

    entities("load", str(write({"devices": EXAMPLE["devices"]})))

    assert Subject.objects.filter(present=True).count() == 6


def test_a_partial_load_or_a_file_without_devices_removes_nothing(home, write):
    entities("load", str(write(EXAMPLE)))

    entities("load", "--partial", str(write({"devices": []})))
    entities("load", str(write({"rooms": [{"name": "Garage"}]})))

    assert Subject.objects.filter(kind="device", present=True).count() == 2
    assert Subject.objects.filter(name="Garage").exists()


def test_renaming_a_device_keeps_its_facts_and_the_nicknames_the_file_leaves_out(home, write):
    entities("load", str(write(EXAMPLE)))
    learn(Statement.typed(memory=home, text=FLICKER, origin="typed"))
    renamed = {"entity_id": "light.office_lamp", "name": "Desk lamp", "room": "Hall"}

    printed = entities("load", str(write({"devices": [renamed, EXAMPLE["devices"][1]]})))

    assert "1 updated" in printed
    lamp = resolve(home, ["the beacon"])[0]
    assert (lamp.name, lamp.room.name) == ("Desk lamp", "Hall")
    assert live_texts(home) == [FLICKER]


def test_a_new_device_may_take_the_name_of_one_that_is_gone(home, write):
    entities("load", str(write(EXAMPLE)))
    new_lamp = {"entity_id": "light.office_lamp_2", "name": "Office lamp", "room": "Office"}

    printed = entities("load", str(write({"devices": [new_lamp, EXAMPLE["devices"][1]]})))

    assert "1 added" in printed and "1 removed" in printed
    assert resolve(home, ["office lamp"])[0].entity_id == "light.office_lamp_2"
    assert not Subject.objects.get(name="Office lamp (light.office_lamp)").present


def test_two_devices_may_swap_names_in_one_load(home, write):
    entities("load", str(write(EXAMPLE)))
    lamp, sensor = EXAMPLE["devices"]
    swapped = [{**lamp, "name": "Hall sensor"}, {**sensor, "name": "Office lamp"}]

    entities("load", str(write({"devices": swapped})))

    assert resolve(home, ["Hall sensor"])[0].entity_id == "light.office_lamp"
    assert resolve(home, ["Office lamp"])[0].entity_id == "sensor.hall_battery"


BAD_FILES = [
    ("house.json", '{"rooms": [', "house.json is not valid JSON: Expecting value at line 1."),
    ("house.yaml", "rooms: [unclosed", "house.yaml is not valid YAML: "),
    ("house.yaml", "- just a list", "house.yaml must be a mapping with house, rooms"),
    ("house.json", {"device": []}, "house.json: unknown section 'device'"),
    ("house.json", {"rooms": [{"aliases": ["x"]}]}, "house.json: rooms #2 has no name."),
    (
        "house.json",
        {"devices": [{"name": "Kettle"}]},
        "house.json: devices #1 (Kettle) has no entity_id.",
    ),
    (
        "house.json",
        {"devices": [{"entity_id": "kettle", "name": "Kettle"}]},
        "house.json: devices #1 (kettle) has entity_id 'kettle', which is not domain.object_id",
    ),
    (
        "house.json",
        {"devices": [{"entity_id": "switch.kettle", "name": "Kettle", "room": "Kitchen"}]},
        "house.json: devices #1 (switch.kettle) is in room 'Kitchen', which is neither listed",
    ),
    (
        "house.json",
        {"people": [{"name": "Sarah"}, {"name": "sarah"}]},
        "house.json: people #2 (sarah) repeats people #1 (Sarah)",
    ),
    (
        "house.json",
        {"devices": [{"entity_id": "switch.kettle", "name": "Kettle", "colour": "red"}]},
        "house.json: devices #1 has an unknown key 'colour'",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_FILES)
def test_a_bad_file_is_refused_in_one_line_naming_the_entry_with_nothing_written(
    home, write, name, content, message
):
    entities("load", str(write(EXAMPLE)))
    before = snapshot(home)
    if isinstance(content, dict):  # a good entry first, so a half-write would show
        content = {**content, "rooms": [{"name": "Garage"}, *content.get("rooms", [])]}

    with pytest.raises(CommandError) as refused:
        entities("load", str(write(content, name)))

    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)
    assert snapshot(home) == before


def test_a_file_that_is_not_there_is_refused_in_one_line(home, tmp_path):
    with pytest.raises(CommandError, match=r"^Cannot read .*nowhere.json: "):
        entities("load", str(tmp_path / "nowhere.json"))


def test_an_unknown_memory_is_refused(home, write):
    with pytest.raises(CommandError, match=r"There is no memory called 'attic'\."):
        entities("load", str(write(EXAMPLE)), "--memory", "attic")


def test_the_list_shows_each_subject_with_its_room_and_nicknames(home, write):
    assert entities("list").startswith("No rooms, devices or people yet")
    entities("load", str(write(EXAMPLE)))

    listed = entities("list", "--memory", "home").splitlines()

    assert "device  Office lamp  light.office_lamp  in Office  aka the beacon" in listed
    assert listed[-1] == "6 in the house, 0 gone."


# Home Assistant -------------------------------------------------------------------------------


class HomeAssistantStub:
    """What the stub server answers: ``states`` as JSON, or ``body`` verbatim."""

    def __init__(self) -> None:
        self.states: list = list(STATES)
        self.body: bytes | None = None
        self.seen: list[tuple[str, str | None]] = []


@pytest.fixture
def home_assistant(settings):
    """A Home Assistant stand-in on 127.0.0.1 that checks the bearer token like the real one."""
    stub = HomeAssistantStub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stub.seen.append((self.path, self.headers.get("Authorization")))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                status, body = 401, b"401: Unauthorized"
            elif self.path != "/api/states":
                status, body = 404, b"404: Not Found"
            else:
                status, body = 200, stub.body or json.dumps(stub.states).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.HA_URL = f"http://127.0.0.1:{server.server_port}/"
    settings.HA_TOKEN = TOKEN
    yield stub
    server.shutdown()
    server.server_close()
    thread.join()


def test_syncing_from_home_assistant_creates_devices_people_and_rooms_from_areas(
    home, home_assistant
):
    printed = entities("sync-ha")

    # The count of entities as they are synced, then the summary.
    assert printed.splitlines()[:2] == ["Syncing 1/4 entities", "Syncing 2/4 entities"]
    assert printed.splitlines()[-1].startswith("Home Assistant at http://127.0.0.1:")
    assert "4 added, 0 updated, 0 removed" in printed
    assert home_assistant.seen == [("/api/states", f"Bearer {TOKEN}")]
    lamp = resolve(home, ["light.office_lamp"])[0]
    assert (lamp.name, lamp.room.name) == ("Office lamp", "Office")
    assert resolve(home, ["Hall sensor battery"])[0].room is None
    assert resolve(home, ["Sarah"])[0].entity_id == "person.sarah"
    assert not Subject.objects.filter(entity_id__in=["sun.sun", "zone.home"]).exists()


def test_a_sync_from_home_assistant_keeps_the_nicknames_and_rooms_a_file_gave(
    home, write, home_assistant
):
    entities("load", str(write(EXAMPLE)))

    printed = entities("sync-ha")

    # Sarah gains person.sarah and the sensor Home Assistant's name; nothing is added twice.
    assert "0 added, 2 updated, 0 removed, 0 returned, 2 unchanged." in printed
    assert resolve(home, ["the beacon"])[0].entity_id == "light.office_lamp"
    assert resolve(home, ["Hall sensor battery"])[0].room.name == "Hall"
    sarah = Subject.objects.get(kind="person")
    assert sarah.entity_id == "person.sarah"


def test_an_entity_home_assistant_stops_listing_is_gone_until_it_is_listed_again(
    home, home_assistant
):
    entities("sync-ha")
    learn(Statement.typed(memory=home, text=FLICKER, origin="typed"))
    listed = home_assistant.states
    home_assistant.states = [s for s in listed if s["entity_id"] != "light.office_lamp"]

    assert "1 removed" in entities("sync-ha")
    assert live_texts(home) == []

    home_assistant.states = listed
    assert "1 returned" in entities("sync-ha")
    assert live_texts(home) == [FLICKER]


def test_two_entities_with_one_friendly_name_each_keep_their_entity_id_in_the_name(
    home, home_assistant
):
    home_assistant.states = [
        {"entity_id": "binary_sensor.hall_motion", "attributes": {"friendly_name": "Motion"}},
        {"entity_id": "binary_sensor.loft_motion", "attributes": {"friendly_name": "Motion"}},
        {"entity_id": "switch.kettle", "attributes": {}},
    ]

    entities("sync-ha")

    assert sorted(Subject.objects.values_list("name", flat=True)) == [
        "Kettle",
        "Motion (binary_sensor.hall_motion)",
        "Motion (binary_sensor.loft_motion)",
    ]


def test_home_assistant_refusing_the_token_is_one_clear_line_and_changes_nothing(
    home, settings, home_assistant
):
    settings.HA_TOKEN = "an-old-token"

    with pytest.raises(CommandError) as refused:
        entities("sync-ha")

    assert str(refused.value) == (
        f"Home Assistant at {settings.HA_URL} refused the token (401): set HA_TOKEN to a "
        "long-lived access token from your Home Assistant profile."
    )
    assert not Subject.objects.exists()


def test_an_unreachable_home_assistant_is_one_clear_line(home, settings):
    with socket.socket() as probe:  # a port nothing listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.HA_URL, settings.HA_TOKEN = f"http://127.0.0.1:{port}", TOKEN

    with pytest.raises(CommandError, match=r"^Cannot reach Home Assistant at http://127\."):
        entities("sync-ha")


def test_home_assistant_answering_with_something_not_json_is_refused(home, home_assistant):
    home_assistant.body = b"<html>Login</html>"

    with pytest.raises(CommandError, match="answered /api/states with something that is not"):
        entities("sync-ha")


def test_home_assistant_listing_nothing_is_not_taken_as_every_device_gone(home, home_assistant):
    entities("sync-ha")
    home_assistant.states = []

    with pytest.raises(CommandError, match="listed no entities; not treating that as every"):
        entities("sync-ha")
    assert not Subject.objects.filter(present=False).exists()


def test_sync_ha_without_a_url_or_token_says_what_to_set(home, settings):
    settings.HA_URL, settings.HA_TOKEN = "http://homeassistant.local:8123", ""

    with pytest.raises(CommandError, match=r"^Set HA_URL .* and HA_TOKEN"):
        entities("sync-ha")


def test_the_beat_sync_task_syncs_when_configured_and_only_warns_when_unreachable(
    home, settings, home_assistant, caplog
):
    tasks.sync_home_assistant()
    assert resolve(home, ["Office lamp"])[0].present

    settings.HA_TOKEN = "an-old-token"
    with caplog.at_level(logging.WARNING, logger="knowledge.tasks"):
        tasks.sync_home_assistant()
    assert "Home Assistant sync skipped: " in caplog.text
    assert "refused the token (401)" in caplog.text


def test_entries_from_a_script_are_checked_like_a_file(home):
    bad = registry.Entry(kind="device", name="Kettle", entity_id="Switch.Kettle", where="kettle")

    with pytest.raises(registry.RegistryError, match=r"which is not domain\.object_id"):
        registry.sync_entities(memory=home, entries=[bad], source_name="script")
    assert not Subject.objects.exists()
