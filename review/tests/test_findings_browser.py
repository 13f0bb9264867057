"""The Findings tab in a real browser: each button, the toast it shows, and the nav badge."""

from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory, Subject
from review import findings as review_findings
from review import guesses as review_guesses

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FRIDGE = "The garage fridge is meant to run 24/7"


@pytest.fixture
def home() -> Memory:
    return Memory.objects.default()


@pytest.fixture
def waiting(home) -> SimpleNamespace:
    """Three things waiting on a decision: a problem on the landing, a to-do and a guess."""
    hall = Subject.objects.create(memory=home, kind="room", name="Hall")
    Subject.objects.create(
        memory=home,
        kind="device",
        name="Landing motion",
        entity_id="binary_sensor.landing_motion",
        room=hall,
    )
    motion = review_findings.raise_finding(
        memory=home,
        check_id="motion-at-night",
        text="Motion on the landing at 3am",
        severity="medium",
        entity_id="binary_sensor.landing_motion",
    ).finding
    todo = review_findings.raise_finding(
        memory=home, check_id="descale", text="Descale the kettle", severity="low", is_todo=True
    ).finding
    guess = review_guesses.propose_guess(memory=home, text=FRIDGE).guess
    return SimpleNamespace(motion=motion, todo=todo, guess=guess)


@pytest.fixture
def findings(signed_in_page, waiting):
    """The Findings tab, opened once the data is in place, with its badge at 3."""
    page = signed_in_page
    page.goto("/findings/")
    page.evaluate("window.stayedOnThePage = true")
    expect(badge(page)).to_have_text("3")
    return page


def badge(page):
    return page.get_by_role("navigation", name="Main").locator("#badge-findings")


def toast(page):
    return page.locator("#toasts .toast").last


def stayed(page) -> bool:
    return page.evaluate("window.stayedOnThePage === true")


def test_not_a_problem_with_a_reason_makes_a_rule(findings, waiting):
    card = findings.locator(f"#finding-{waiting.motion.pk}")

    card.get_by_text("Not a problem…").click()
    card.get_by_label("Why it isn’t a problem").fill("It's the cat")
    card.get_by_role("button", name="Not a problem", exact=True).click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text(
        "Not a problem: brain won't raise “Movement at night” on Landing motion."
    )
    expect(badge(findings)).to_have_text("2")
    expect(findings.locator("#rules")).to_contain_text("“It's the cat”")
    assert stayed(findings)


def test_a_wide_rule_is_confirmed_before_it_is_made(findings, waiting):
    card = findings.locator(f"#finding-{waiting.motion.pk}")

    card.get_by_text("Not a problem…").click()
    card.get_by_label("this check everywhere").check()
    card.get_by_label("for a month").check()
    card.get_by_role("button", name="Not a problem", exact=True).click()

    expect(card).to_contain_text(
        "This stops “Movement at night” being raised anywhere in the house, for a month"
    )
    expect(badge(findings)).to_have_text("3")
    card.get_by_role("button", name="Make this rule").click()

    expect(card).to_have_count(0)
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)
    expect(findings.locator("#rules")).to_contain_text("Not raised: “Movement at night” everywhere")


def test_ive_already_fixed_it(findings, waiting):
    card = findings.locator(f"#finding-{waiting.motion.pk}")

    card.get_by_role("button", name="I've already fixed it").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Marked fixed: “Motion on the landing at 3am”")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_got_it(findings, waiting):
    card = findings.locator(f"#finding-{waiting.motion.pk}")

    card.get_by_role("button", name="Got it").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Got it: “Motion on the landing at 3am”")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_done_on_a_to_do(findings, waiting):
    card = findings.locator(f"#finding-{waiting.todo.pk}")

    card.get_by_role("button", name="Done").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Done: “Descale the kettle”.")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_one_toast_at_a_time_says_what_happened_and_covers_no_button(findings, waiting):
    findings.locator(f"#finding-{waiting.todo.pk}").get_by_role("button", name="Done").click()
    expect(toast(findings)).to_contain_text("Done: “Descale the kettle”.")
    findings.locator(f"#finding-{waiting.motion.pk}").get_by_role("button", name="Got it").click()

    expect(toast(findings)).to_contain_text("Got it: “Motion on the landing at 3am”")
    expect(findings.locator("#toasts .toast")).to_have_count(1)
    covered = findings.evaluate(
        """() => {
          const toast = document.querySelector('#toasts .toast').getBoundingClientRect();
          return [...document.querySelectorAll('main button, main .button')].filter(el => {
            const r = el.getBoundingClientRect();
            if (!r.width) return false;
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const top = document.elementFromPoint(x, y);
            return top && !el.contains(top) && top.closest('#toasts');
          }).map(el => el.textContent.trim());
        }"""
    )
    assert covered == []
    assert findings.evaluate("getComputedStyle(document.getElementById('toasts')).position") != (
        "fixed"
    )


def test_yes_files_the_guess(findings, waiting):
    card = findings.locator(f"#guess-{waiting.guess.pk}")
    expect(card).to_contain_text(f"{FRIDGE} — right?")

    card.get_by_role("button", name="✓ Yes").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Filed as known.")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_no_with_a_reason(findings, waiting):
    card = findings.locator(f"#guess-{waiting.guess.pk}")

    card.get_by_label("Why not?").fill("It is switched off in winter")
    card.get_by_role("button", name="✕ No").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Your reason is kept as a correction.")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_dismiss(findings, waiting):
    card = findings.locator(f"#guess-{waiting.guess.pk}")

    card.get_by_role("button", name="Dismiss").click()

    expect(card).to_have_count(0)
    expect(toast(findings)).to_contain_text("Dismissed for now")
    expect(badge(findings)).to_have_text("2")
    assert stayed(findings)


def test_undo_on_a_rule(signed_in_page, home, waiting):
    porch = review_findings.raise_finding(
        memory=home, check_id="light-on", text="The porch light is on", severity="low"
    ).finding
    rule = review_findings.not_a_problem(finding=porch, reason="It's a night light")
    page = signed_in_page
    page.goto("/findings/")
    page.evaluate("window.stayedOnThePage = true")
    row = page.locator(f"#rule-{rule.pk}")
    expect(row).to_contain_text("“It's a night light”")

    row.get_by_role("button", name="Undo").click()

    expect(row).to_have_count(0)
    expect(toast(page)).to_contain_text("Removed the rule: brain may raise “Light left on”")
    expect(page.locator("#rules")).to_contain_text("No rules")
    expect(badge(page)).to_have_text("3")
    assert stayed(page)
