"""Generated household lines at any size: the seed's example lines and as many more as asked,
filled from templates, deterministic for a seed.

Used by the benchmarks and tests that need volume (a 32 KB document, thousands of facts to
file). They read alike by design; `make demo` loads the household written by hand instead
(memory/fixtures/demo-facts.yaml, review/demo_household.py).
"""

from __future__ import annotations

import random

SEED_LINES = {
    "House": [
        "Heating is an 8 kW air-source heat pump on weather compensation. It is not a "
        "boiler, so “boost the heating” means raising the flow temperature."
    ],
    "People": [
        "Sarah is a light sleeper. Nothing in the hallway should go above 15% brightness "
        "between 23:00 and 06:00."
    ],
    "Rooms": ["“The office” means the upstairs back bedroom, not the study downstairs."],
    "Devices": [
        "The garage fridge is meant to run 24/7. Its draw looking abnormal at 3 am is "
        "the defrost cycle, not a fault."
    ],
    "Rules": [
        "Never rename an entity_id without asking — several are referenced in a Node-RED "
        "flow I cannot see."
    ],
}

ROOMS = [
    "kitchen",
    "living room",
    "hallway",
    "landing",
    "main bedroom",
    "back bedroom",
    "office",
    "study",
    "bathroom",
    "en-suite",
    "utility room",
    "garage",
    "loft",
    "porch",
    "dining room",
    "conservatory",
    "cellar",
    "nursery",
    "guest room",
    "shed",
]
DEVICES = [
    "ceiling light",
    "lamp",
    "radiator valve",
    "motion sensor",
    "door contact",
    "smart plug",
    "blind",
    "speaker",
    "thermostat",
    "humidity sensor",
    "fan",
    "LED strip",
    "camera",
    "window contact",
    "dehumidifier",
]
PEOPLE = ["Sarah", "Tom", "Priya", "Luca", "Grandma Jean", "Ollie", "Mia"]
PREFERENCES = [
    "{person} likes the {room} at {temp} degrees in the evening.",
    "{person} prefers warm white light in the {room} after sunset.",
    "{person} wants the {room} {device} off when nobody is in.",
    "{person} likes music in the {room} on weekend mornings.",
]
ROUTINES = [
    "On weekdays the {room} {device} comes on at {hour}:{minute:02d}.",
    "The {room} is aired every morning around {hour}:{minute:02d}.",
    "Bins go out on {day} evening; the porch light stays on until {hour}:00.",
    "The dog gets fed at {hour} and {later} — {room} lights on then means feeding time.",
]
DEVICE_FACTS = [
    "The {room} {device} drops offline for a minute around {hour}am; it recovers by itself.",
    "The {room} {device} is called “the {nickname}”.",
    "The {room} {device} reads about {delta} degrees high in direct sun.",
    "The {room} {device} is on the Zigbee network and sometimes needs re-pairing after power cuts.",
    "The {room} {device} battery was replaced in {month}.",
]
ROOM_FACTS = [
    "The {room} gets cold quickly when the {device} is open.",
    "Guests sleep in the {room} when they stay.",
    "The {room} is used as a {use} on {day}s.",
]
NICKNAMES = ["beacon", "moon", "lighthouse", "glow", "big light", "reading light", "sun"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
USES = ["gym", "playroom", "workshop", "quiet room", "office"]


def _fill(template: str, rng: random.Random) -> str:
    hour = rng.randint(5, 9)
    return template.format(
        person=rng.choice(PEOPLE),
        room=rng.choice(ROOMS),
        device=rng.choice(DEVICES),
        temp=rng.choice([18, 19, 20, 21, 22]),
        hour=hour,
        later=hour + 10,
        minute=rng.choice([0, 15, 30, 45]),
        day=rng.choice(DAYS),
        nickname=rng.choice(NICKNAMES),
        delta=rng.choice([1, 2, 3]),
        month=rng.choice(MONTHS),
        use=rng.choice(USES),
    )


def household_facts(count: int, *, seed: int = 1) -> list[str]:
    """``count`` distinct household facts, the same ones for the same seed."""
    rng = random.Random(seed)
    templates = PREFERENCES + ROUTINES + DEVICE_FACTS + ROOM_FACTS
    facts: list[str] = []
    seen: set[str] = set()
    while len(facts) < count:
        fact = _fill(rng.choice(templates), rng)
        if fact not in seen:
            seen.add(fact)
            facts.append(fact)
    return facts


def _section(fact: str) -> str:
    if fact.startswith(tuple(PEOPLE)):
        return "Preferences"
    if fact.startswith(("On weekdays", "Bins", "The dog")) or "every morning" in fact:
        return "Routines"
    if any(f" {device} " in fact for device in DEVICES):
        return "Devices"
    return "Rooms"


def household_document(target_bytes: int, *, seed: int = 3) -> str:
    """A memory document of about ``target_bytes`` (never more): the seed lines, then facts."""
    sections = {name: list(lines) for name, lines in SEED_LINES.items()}
    for name in ("Preferences", "Routines"):
        sections.setdefault(name, [])

    def render() -> str:
        order = ["House", "People", "Rooms", "Devices", "Preferences", "Routines", "Rules"]
        parts = ["# Memory\n"]
        for name in order:
            parts.append(f"\n## {name}\n\n" + "".join(f"- {line}\n" for line in sections[name]))
        return "".join(parts)

    for fact in household_facts(10_000, seed=seed):
        sections[_section(fact)].append(fact)
        if len(render().encode()) > target_bytes:
            sections[_section(fact)].pop()
            break
    return render()
