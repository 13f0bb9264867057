"""What each house check is called where a person reads it: "Water leak", never ``water_leak``.

A check's id is whatever the house checks (Home Assistant automations, insight runs, the API)
send, so this cannot be a closed list. The checks brain knows get a name written for them
(``NAMES``); any other id is read as words — ``lock_battery_low`` becomes "Lock battery low",
``motion-at-night`` "Motion at night" — so no id a person sees is ever a code.
"""

from __future__ import annotations

import re

NAMES = {
    # Water, smoke, gas and cold: raised every time (review.findings.PROTECTED_WORDS).
    "leak": "Water leak",
    "water_leak": "Water leak",
    "moisture": "Water where it should not be",
    "flood": "Flooding",
    "smoke": "Smoke",
    "smoke_alarm": "Smoke alarm",
    "smoke_alarm_chirp": "Smoke alarm chirping",
    "co_alarm": "Carbon monoxide alarm",
    "co_alarm_offline": "Carbon monoxide alarm not reporting",
    "gas": "Gas",
    "gas_leak": "Gas leak",
    "freeze": "Risk of freezing",
    "frost": "Risk of frost",
    # Devices.
    "battery": "Battery running low",
    "battery_low": "Battery running low",
    "lock_battery_low": "Lock battery running low",
    "unavailable": "Not reporting",
    "device_unavailable": "Not reporting",
    "offline": "Not reporting",
    "short_cycling": "Keeps switching on and off",
    "left_on": "Left on",
    "light-on": "Light left on",
    "light_on": "Light left on",
    "left_unplugged": "Left unplugged",
    "descale": "Needs descaling",
    "filter": "Filter needs cleaning",
    # Doors, rooms and people.
    "door_left_open": "Door left open",
    "fridge_door": "Fridge door open",
    "window_open": "Window left open",
    "too_warm": "Too warm",
    "too_cold": "Too cold",
    "humidity_high": "Damp",
    "high_humidity": "Damp",
    "motion": "Movement",
    "night_motion": "Movement at night",
    "motion-at-night": "Movement at night",
    "motion_at_night": "Movement at night",
    "late_return": "Home later than usual",
    "base_load_high": "High power use overnight",
}

_SEPARATORS = re.compile(r"[_\-.]+")


def name_of(check_id: str) -> str:
    """The name a person reads for ``check_id``."""
    if check_id in NAMES:
        return NAMES[check_id]
    words = " ".join(_SEPARATORS.sub(" ", check_id).split())
    return words[:1].upper() + words[1:] if words else "A house check"


def rule_words(rule) -> str:
    """A rule as a person reads it: ``Rule.describe`` (which the API and the terminal keep, with
    the check's id) with the check named."""
    return rule.describe().replace(f"“{rule.check_id}”", f"“{name_of(rule.check_id)}”")
