"""Every tab on a desk (1280×800) and on a phone (390×844), in a real browser, on the demo
household: one page load a tab and a size, several things checked on each.

- nothing scrolls sideways;
- the header is one row (every item in it on one line) and a phone's Menu holds every tab and
  who is signed in;
- no console error (the Content-Security-Policy refuses inline styles and scripts: one would
  show here);
- every button looks like a button (a border or a face of its own), ✕ aside;
- a household member's pages say no internal name: no check id, event name, task name, setting
  name, make command or confidence as a number;
- the numbers agree: House, the brief, the chart, the Findings tab and its badge, the Knowledge
  tab and the API, and every number on House is the one the page it links to shows.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from brain.llm.routing import TASKS
from brain.tests.pages import sign_in
from knowledge.models import Memory
from review import demo_household
from review.models import Event, Finding

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESK, PHONE = (1280, 800), (390, 844)
HOUSEHOLD = ["/", "/knowledge/", "/findings/", "/sources/", "/sources/pages/"]
OPERATOR = ["/settings/"]
TABS = ["House", "Knowledge", "Findings", "Sources", "Pages", "Settings", "Admin"]
# Names that are brain's own, never a household member's words.
SETTING_NAMES = ["memory_max_kb", "memory_injection", "learning: false", "HA_URL", "BRAIN_"]
COMMANDS = ["make demo", "make run", "/healthz", "See the run"]
NUMBERS_AS_CONFIDENCE = re.compile(r"confidence \d\.\d")

MEASURE = """() => {
  const visible = el => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const header = document.querySelector('.site-header');
  const items = [...header.children].filter(visible).map(el => el.getBoundingClientRect());
  const alpha = color => { const m = color.match(/rgba?\\(([^)]+)\\)/); if (!m) return 1;
    const parts = m[1].split(',').map(Number); return parts.length > 3 ? parts[3] : 1; };
  const flat = [...document.querySelectorAll('button, .button, summary.button, input[type=submit]')]
    .filter(visible).filter(el => !el.matches('.icon-button, .toast-close'))
    .filter(el => { const s = getComputedStyle(el);
      const border = parseFloat(s.borderTopWidth) > 0 && alpha(s.borderTopColor) > 0
        && s.borderTopStyle !== 'none';
      const face = alpha(s.backgroundColor) > 0;
      return !(border || face); })
    .map(el => el.textContent.trim());
  const ticks = [...document.querySelectorAll('.chart .dates .tick')].filter(visible)
    .map(el => parseFloat(getComputedStyle(el).fontSize));
  return {
    width: document.documentElement.clientWidth,
    scrollWidth: document.documentElement.scrollWidth,
    headerHeight: header.getBoundingClientRect().height,
    centres: items.map(r => r.top + r.height / 2),
    flat: flat,
    ticks: ticks,
    text: document.body.innerText,
  };
}"""


@pytest.fixture
def demo() -> Memory:
    home = Memory.objects.default()
    demo_household.load(home)
    return home


def _internal_names(memory: Memory) -> list[str]:
    checks = set(Finding.objects.filter(memory=memory).values_list("check_id", flat=True))
    events = [kind for kind, _ in Event.Kind.choices]
    tasks = [task for task, _ in TASKS if "_" in task]
    return sorted(checks | set(events) | set(tasks)) + SETTING_NAMES + COMMANDS


def _number(page, name: str) -> int:
    words = page.locator(f'[data-number="{name}"]').inner_text()
    return int(words.split()[0].replace(",", ""))


def _walk(page, path: str, errors: list[str]) -> dict:
    errors.clear()
    page.goto(path)
    page.wait_for_load_state("load")
    measured = page.evaluate(MEASURE)
    measured["errors"] = list(errors)
    return measured


def test_every_tab_fits_a_desk_and_a_phone_in_plain_words_with_numbers_that_agree(
    demo, chromium, live_server, admin_user, password
):
    internal = _internal_names(demo)
    errors: list[str] = []
    for size in (DESK, PHONE):
        context = chromium.new_context(
            base_url=live_server.url, viewport={"width": size[0], "height": size[1]}
        )
        context.set_default_timeout(10_000)
        page = context.new_page()
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(page, admin_user.username, password)
        for path in HOUSEHOLD + OPERATOR:
            seen = _walk(page, path, errors)
            where = f"{path} at {size[0]} px"
            assert seen["scrollWidth"] <= seen["width"], f"{where} scrolls sideways"
            centres = seen["centres"]
            one_row = max(centres) - min(centres) < 12 and seen["headerHeight"] < 64
            assert one_row, f"{where}: the header is not one row ({seen['headerHeight']} px)"
            assert seen["errors"] == [], f"{where}: {seen['errors']}"
            assert seen["flat"] == [], f"{where}: buttons that look like text {seen['flat']}"
            if path in HOUSEHOLD:
                text = seen["text"]
                said = [name for name in internal if name in text]
                assert said == [], f"{where} says {said}"
                assert not NUMBERS_AS_CONFIDENCE.search(text), where
            if path == "/" and size == PHONE:
                _the_phone_has_a_menu_and_a_readable_chart(page, seen, admin_user.username)
            if path == "/" and size == DESK:
                _the_numbers_agree(page)
        context.close()


def _the_phone_has_a_menu_and_a_readable_chart(page, seen: dict, username: str) -> None:
    assert seen["ticks"] and min(seen["ticks"]) >= 11, seen["ticks"]
    assert "Hover" not in page.locator("#weeks").inner_text()
    menu = page.locator("details.menu")
    menu.locator("summary").click()
    panel = menu.locator(".menu-panel")
    expect(panel).to_be_visible()
    for tab in TABS:
        expect(panel.get_by_role("link", name=tab, exact=False).first).to_be_visible()
    expect(panel).to_contain_text(f"Signed in as {username}")
    box = panel.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0]
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()


def _the_numbers_agree(page) -> None:
    """House, the brief, the chart, the Findings tab, its badge, the Knowledge tab and the API,
    on the desk; every number on House is the one the page it links to shows."""
    expect(page.locator("#brief")).to_contain_text("brain learned")
    recent = page.locator("#recently-learned li")
    expect(recent).to_have_count(6)
    expect(recent.first).to_contain_text("taught by tom")
    known, week, waiting = (_number(page, name) for name in ("known", "week", "waiting"))
    assert known > 150 and waiting > 0
    deciding = _number(page, "waiting-on-you")
    findings, guesses = _number(page, "findings"), _number(page, "guesses")
    assert findings + guesses == deciding and guesses > 0
    brief = page.locator("#brief").inner_text()
    said_waiting = re.search(r"(\d+) lines? waits? to be filed", brief)
    assert said_waiting and int(said_waiting.group(1)) == waiting, brief
    bars = page.locator("#weeks svg rect.bar.learned")
    expect(bars).to_have_count(13)
    assert any(float(bar.get_attribute("height")) > 0 for bar in bars.all())
    # The weeks' table, newest first: this week is House's "learned this week".
    weeks = [
        [int(cell) for cell in row[1:]]
        for row in page.locator(".week-numbers tbody tr").evaluate_all(
            "rows => rows.map(row => [...row.cells].map(cell => cell.textContent.trim()))"
        )
    ]
    assert weeks[0][0] == week
    assert _number(page, "learned-weeks") == sum(learned for learned, _ in weeks)
    assert _number(page, "raised-weeks") == sum(raised for _, raised in weeks)
    sensors = page.request.get("/api/status/").json()
    assert sensors["memory_facts_learned"]["state"] == known
    said_guesses = len(sensors["memory_waiting_on_you"]["attributes"]["guesses"])
    assert (sensors["findings_open_findings"]["state"], said_guesses) == (findings, guesses)
    expect(page.locator("#badge-findings")).to_have_text(str(deciding))

    _follow(page, "known")
    assert page.url.endswith("/knowledge/#facts-card")
    expect(page.locator("[data-measure=known] .value")).to_have_text(f"{known:,}")
    page.goto("/")
    _follow(page, "week")
    expect(page.locator("[data-measure=week] .value")).to_have_text(str(week))
    page.goto("/")
    _follow(page, "waiting")
    expect(page.locator("[data-measure=waiting] .value")).to_have_text(str(waiting))
    expect(page.locator("[data-waiting-count]")).to_have_text(str(waiting))
    expect(page.locator("#waiting li[id^=item-]")).to_have_count(waiting)
    page.goto("/")
    _follow(page, "waiting-on-you")
    expect(page.locator("[data-waiting-count]").first).to_have_text(str(deciding))
    expect(page.locator("li[data-kind=finding]")).to_have_count(findings)
    expect(page.locator("li[data-kind=guess]")).to_have_count(guesses)
    expect(page.locator("#badge-findings")).to_have_text(str(deciding))


def _follow(page, name: str) -> None:
    page.locator(f'[data-number="{name}"]').click()
    page.wait_for_load_state()
