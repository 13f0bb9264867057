"""A house check is named in words wherever a person reads it (review.check_names): the
Findings tab, its rules and its questions say "Water leak", never ``water_leak``."""

import re

import pytest
from django.urls import reverse

from review import check_names, findings
from review.models import Finding


@pytest.mark.parametrize(
    ("check_id", "name"),
    [
        ("water_leak", "Water leak"),
        ("short_cycling", "Keeps switching on and off"),
        ("battery_low", "Battery running low"),
        ("device_unavailable", "Not reporting"),
        ("motion-at-night", "Movement at night"),
        ("lock_battery_low", "Lock battery running low"),
        ("boiler_pressure_drop", "Boiler pressure drop"),
        ("solar.inverter-offline", "Solar inverter offline"),
        ("___", "A house check"),
    ],
)
def test_every_check_has_a_name_in_words(check_id, name):
    assert check_names.name_of(check_id) == name


def _visible(page: str) -> str:
    main = page.split("<main", 1)[1]
    return re.sub(r"<[^>]+>", " ", main)


def test_the_findings_tab_names_checks_and_rules_and_explains_always_raised(signed_in, home):
    leak = findings.raise_finding(
        memory=home, check_id="water_leak", text="Water under the sink.", severity="high"
    ).finding
    cycling = findings.raise_finding(
        memory=home, check_id="short_cycling", text="The heat pump cycles.", severity="medium"
    ).finding
    quiet = findings.raise_finding(
        memory=home, check_id="device_unavailable", text="The pond pump is quiet.", severity="low"
    ).finding
    findings.not_a_problem(finding=quiet, by=None)

    page = signed_in.get(reverse("review:findings")).content.decode()
    text = _visible(page)

    for code in ("water_leak", "short_cycling", "device_unavailable", "protected"):
        assert code not in text, code
    assert "Water leak" in text and "Keeps switching on and off" in text
    assert "Not raised: “Not reporting”" in text
    assert "always raised" in text
    assert 'title="Leaks, smoke, gas and freezing are raised every time' in page
    assert {leak.state, cycling.state} == {Finding.State.OPEN}
