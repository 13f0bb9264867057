"""A Content-Security-Policy on every page, and pages that keep working under it.

The policy allows scripts and styles from our own origin only: no inline script, no inline event
handler, no ``style=`` attribute, no eval. A stored text that slipped through as markup could
run nothing.
"""

import re
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from knowledge.models import Memory, Source, Subject
from memory import actions as memory_actions
from memory.models import ConsolidationRun, Origin
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses

POLICY = {
    "default-src": {"'self'"},
    "object-src": {"'none'"},
    "base-uri": {"'self'"},
    "frame-ancestors": {"'none'"},
    "form-action": {"'self'"},
}
UNSAFE = {"'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "*", "data:", "http:", "https:"}


def _policy(response) -> dict[str, set[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    directives = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = set(words[1:])
    return directives


@pytest.fixture
def content(db, admin_user) -> SimpleNamespace:
    """Something on every tab: a fact and its source, a finding, a guess."""
    home = Memory.objects.default()
    fact = memory_actions.learn(
        Statement.typed(
            memory=home,
            text="The garage freezer is off in winter.",
            origin=Origin.TYPED,
            by=admin_user,
        )
    ).fact
    hall = Subject.objects.create(memory=home, kind="room", name="Hall")
    review_findings.raise_finding(
        memory=home, check_id="motion-at-night", text="Motion in the hall at 3am", severity="medium"
    )
    review_guesses.propose_guess(memory=home, text="The garage fridge is meant to run 24/7")
    return SimpleNamespace(
        home=home, fact=fact, hall=hall, source=Source.objects.filter(memory=home).first()
    )


def _pages(content, admin_user) -> list[str]:
    return [
        "/",
        "/knowledge/",
        "/findings/",
        "/findings/timeline",
        "/sources/",
        f"/sources/{content.source.pk}/",
        "/admin/",
        "/admin/auth/user/",
        "/admin/auth/user/add/",
        f"/admin/auth/user/{admin_user.pk}/change/",
        f"/admin/auth/user/{admin_user.pk}/password/",
        "/admin/knowledge/memory/",
        f"/admin/knowledge/memory/{content.home.pk}/change/",
        "/admin/memory/inboxitem/",
        "/admin/memory/consolidationrun/",
        "/admin/memory/change/",
    ]


def test_every_page_carries_the_policy(client, admin_user, content):
    client.force_login(admin_user)

    for path in _pages(content, admin_user):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = _policy(response)
        for directive, sources in POLICY.items():
            assert policy.get(directive) == sources, (path, directive)
        for directive in ("script-src", "script-src-attr", "style-src", "default-src"):
            assert not policy.get(directive, set()) & UNSAFE, (path, directive)


def test_the_sign_in_page_a_fragment_and_a_refusal_carry_it_too(client, alice, db):
    assert _policy(client.get("/login/")) and _policy(client.get("/admin/login/"))
    client.force_login(alice)
    fragment = client.get("/knowledge/waiting", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and _policy(fragment)
    assert _policy(client.get("/admin/"))  # not staff: sent to the admin's sign-in
    assert _policy(client.get("/no-such-page/"))


_INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
_HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I)
_STYLE = re.compile(r"<style\b|<[a-z][^>]*\sstyle\s*=", re.I)
_EVAL_ATTRIBUTES = re.compile(r"\shx-on[:-]|\shx-vars=|\"js:|'js:|javascript:", re.I)


def test_our_pages_hold_nothing_the_policy_would_block(client, admin_user, content):
    client.force_login(admin_user)

    for path in _pages(content, admin_user):
        html = client.get(path).content.decode()
        for pattern in (_INLINE_SCRIPT, _HANDLER, _STYLE, _EVAL_ATTRIBUTES):
            assert not pattern.search(html), (path, pattern.search(html))


def test_htmx_neither_injects_styles_nor_evaluates_code(client, alice, db):
    client.force_login(alice)

    html = client.get("/knowledge/").content.decode()

    config = re.search(r'<meta name="htmx-config" content=\'([^\']*)\'>', html)
    assert config, "htmx keeps its defaults"
    assert '"includeIndicatorStyles": false' in config.group(1)
    assert '"allowEval": false' in config.group(1)


# In the browser ---------------------------------------------------------------------------------

WATCH = """
window.policyViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.policyViolations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} ${event.sample || ""}`
  );
});
"""


@pytest.fixture
def watched(signed_in_page):
    """The signed-in page, recording every policy violation, script error and console error."""
    page = signed_in_page
    page.problems = []
    page.add_init_script(WATCH)
    page.on("pageerror", lambda error: page.problems.append(f"error: {error}"))
    page.on(
        "console",
        lambda message: (
            message.type == "error"
            and not message.text.startswith("Failed to load resource")
            and page.problems.append(message.text)
        ),
    )
    # The browser asks every origin for /favicon.ico; the admin's pages do not name our icon.
    page.on(
        "response",
        lambda response: (
            response.status >= 400
            and not response.url.endswith("/favicon.ico")
            and page.problems.append(f"{response.status} {response.url}")
        ),
    )
    return page


def _visit(page, path: str) -> list[str]:
    page.goto(path)
    page.wait_for_load_state("networkidle")
    return page.evaluate("window.policyViolations") + page.problems


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_tab_and_the_admin_run_under_the_policy_without_a_violation(
    watched, admin_user, content
):
    seen = {}
    for path in _pages(content, admin_user):
        problems = _visit(watched, path)
        if problems:
            seen[path] = problems
        watched.problems.clear()

    assert seen == {}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_policy_is_enforced_in_the_browser(watched):
    _visit(watched, "/knowledge/")

    watched.evaluate(
        """document.body.insertAdjacentHTML(
             "beforeend", '<img src="/static/img/brain.svg" onload="window.ran = true">')"""
    )

    expect(watched.locator("body")).to_have_attribute("hx-headers", re.compile("CSRF"))
    watched.wait_for_function("window.policyViolations.length > 0")
    assert watched.evaluate("window.ran === undefined")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_teaching_a_fact_on_the_knowledge_tab_still_works_in_place(watched, content):
    _visit(watched, "/knowledge/")
    watched.evaluate("window.stayedOnThePage = true")

    watched.locator("#teach-text").fill("Guests sleep in the loft.")
    watched.get_by_role("button", name="Teach").click()

    expect(watched.locator("#waiting li", has_text="Guests sleep in the loft.")).to_be_visible()
    expect(watched.locator("#teach [data-taught]")).to_be_visible()  # the box's own words
    assert watched.evaluate("window.stayedOnThePage === true")
    assert watched.evaluate("window.policyViolations") + watched.problems == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_finished_pass_banner_is_dismissed_with_its_cross(watched, content):
    _visit(watched, "/knowledge/")
    watched.get_by_role("button", name="⇪ File into memory now").click()  # asked for here
    banner = watched.locator("#banner")
    expect(banner).to_contain_text("Filing…")
    run = ConsolidationRun.objects.get(memory=content.home)

    ConsolidationRun.objects.filter(pk=run.pk).update(
        state=ConsolidationRun.State.FILED, finished_at=_now()
    )
    expect(banner.locator(".banner.ok")).to_be_visible()
    banner.get_by_role("button", name="Dismiss").click()

    expect(banner.locator(".banner")).to_have_count(0)
    assert watched.evaluate("window.policyViolations") + watched.problems == []


def _now():
    from django.utils import timezone

    return timezone.now()
