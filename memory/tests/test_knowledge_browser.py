"""House → Knowledge in a real browser: what a person clicks, and what they then see."""

import re

import pytest
from playwright.sync_api import expect

from brain.tests.pages import sign_in
from knowledge.models import Fact, Memory, Subject
from memory import actions, consolidator, demo
from memory.models import Origin
from memory.taught import Statement
from surfaces.views.knowledge import FACTS_PER_PAGE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def home() -> Memory:
    return Memory.objects.default()


@pytest.fixture
def knowledge(signed_in_page):
    """The Knowledge tab, opened by the signed-in admin; call it once the data is in place."""

    def open_tab(path: str = "/knowledge/"):
        signed_in_page.goto(path)
        signed_in_page.evaluate("window.stayedOnThePage = true")
        return signed_in_page

    return open_tab


def teach(home, admin_user, text: str):
    return actions.learn(
        Statement.typed(memory=home, text=text, origin=Origin.TYPED, by=admin_user)
    )


def not_reloaded(page) -> bool:
    return (
        page.evaluate("window.stayedOnThePage === true")
        and page.evaluate("performance.getEntriesByType('navigation').length") == 1
    )


def fact_texts(page) -> list[str]:
    return page.locator("#fact-list li.fact .fact-text").all_inner_texts()


def test_an_edited_document_is_saved_and_shown_without_a_reload(knowledge):
    page = knowledge()
    document = page.locator("#document")

    document.get_by_role("link", name="✎ Edit markdown").click()
    editor = document.locator("textarea[name=text]")
    editor.fill(editor.input_value() + "\n- The loft is warm in August.\n")
    document.get_by_role("button", name="Save").click()

    expect(document.locator(".prose li")).to_have_text("The loft is warm in August.")
    expect(page.locator("#changes")).to_contain_text(
        "You edited the document: added “The loft is warm in August.”"
    )
    expect(page.locator("#toasts .toast")).to_contain_text("Saved your edit.")
    assert not_reloaded(page)


def test_a_save_over_the_size_cap_is_refused_and_keeps_the_text(knowledge, home):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    page = knowledge()
    document = page.locator("#document")
    long_text = "# Memory\n\n## Rooms\n\n" + "".join(
        f"- Room {n} has a radiator under the window.\n" for n in range(40)
    )
    assert len(long_text.encode()) > 1024

    document.get_by_role("link", name="✎ Edit markdown").click()
    document.locator("textarea[name=text]").fill(long_text)
    document.get_by_role("button", name="Save").click()

    expect(document.locator(".banner.error")).to_contain_text("over its limit of 1 KB")
    expect(document.locator("textarea[name=text]")).to_have_value(long_text)
    expect(document.locator(".prose")).to_have_count(0)


def test_a_taught_fact_waits_to_be_filed_and_both_counts_go_up(knowledge, home, admin_user):
    teach(home, admin_user, "The garage freezer is off in winter.")
    page = knowledge()
    waiting = page.locator("#waiting")
    expect(waiting.locator("[data-waiting-count]")).to_have_text("1")
    expect(page.locator("[data-measure=waiting] .value")).to_have_text("1")

    page.get_by_label("Teach it something").fill("Guests sleep in the loft.")
    page.get_by_role("button", name="Teach", exact=True).click()

    expect(waiting.locator("li", has_text="Guests sleep in the loft.")).to_be_visible()
    expect(waiting.locator("[data-waiting-count]")).to_have_text("2")
    expect(page.locator("[data-measure=waiting] .value")).to_have_text("2")
    expect(page.locator("#teach [data-taught]")).to_contain_text(
        "brain learned “Guests sleep in the loft.”"
    )
    expect(page.get_by_label("Teach it something")).to_have_value("")
    assert not_reloaded(page)


def test_dropping_a_queued_line_takes_it_out_of_the_queue_and_the_facts(
    knowledge, home, admin_user
):
    kept = teach(home, admin_user, "The garage freezer is off in winter.")
    dropped = teach(home, admin_user, "The loft is warm.")
    page = knowledge()
    waiting = page.locator("#waiting")
    expect(waiting.locator("[data-waiting-count]")).to_have_text("2")

    waiting.get_by_role("button", name="Drop “The loft is warm.” from the queue").click()

    expect(page.locator(f"#item-{dropped.item.pk}")).to_have_count(0)
    expect(page.locator(f"#item-{kept.item.pk}")).to_be_visible()
    expect(waiting.locator("[data-waiting-count]")).to_have_text("1")
    page.reload()
    expect(page.locator("#facts")).to_contain_text("The garage freezer is off in winter.")
    expect(page.locator("#facts")).not_to_contain_text("The loft is warm.")


def test_file_into_memory_now_counts_the_time_then_reports_the_outcome(
    knowledge, home, celery_worker
):
    # Queued through the inbox (the API's way): a line taught in the box is filed at once.
    for text in ("The dog gets fed at 7 and 17.", "Guests sleep in the loft."):
        actions.add_to_inbox(memory=home, text=text, origin=Origin.API)
    page = knowledge()
    for text in ("The dog gets fed at 7 and 17.", "Guests sleep in the loft."):
        expect(page.locator("#waiting li", has_text=text)).to_be_visible()
    expect(page.locator("[data-waiting-count]")).to_have_text("2")

    page.get_by_role("button", name="⇪ File into memory now").click()

    banner = page.locator("#banner")
    expect(banner).to_contain_text(re.compile(r"Filing… \d+ s"))
    expect(banner).to_contain_text(re.compile(r"Filed 2 items"), timeout=60_000)
    expect(page.locator("[data-waiting-count]")).to_have_text("0")
    expect(page.locator("#waiting")).to_contain_text("Nothing is waiting")
    prose = page.locator("#document .prose")
    expect(prose).to_contain_text("The dog gets fed at 7 and 17.")
    expect(prose).to_contain_text("Guests sleep in the loft.")
    assert not_reloaded(page)


def test_searching_by_a_nickname_finds_the_device_and_the_view_can_be_bookmarked(
    knowledge, home, admin_user
):
    Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id="light.office_lamp",
        aliases=["the beacon"],
    )
    teach(home, admin_user, "The office lamp is on a smart plug.")
    teach(home, admin_user, "Guests sleep in the loft.")
    page = knowledge()
    expect(page.locator("#fact-list li.fact")).to_have_count(2)

    page.get_by_label("Search facts").fill("beacon")

    expect(page.locator("#fact-list li.fact")).to_have_count(1)
    expect(page.locator("#fact-list li.fact")).to_contain_text(
        "The office lamp is on a smart plug."
    )
    expect(page).to_have_url(re.compile(r"/knowledge/\?q=beacon$"))
    page.reload()
    expect(page.get_by_label("Search facts")).to_have_value("beacon")
    expect(page.locator("#fact-list li.fact")).to_have_count(1)
    expect(page.locator("#fact-list li.fact")).to_contain_text(
        "The office lamp is on a smart plug."
    )


def test_the_devices_chip_narrows_the_facts_and_oldest_first_reverses_them(
    knowledge, home, admin_user
):
    Subject.objects.create(memory=home, kind="device", name="Office lamp")
    Subject.objects.create(memory=home, kind="device", name="Hall sensor")
    texts = [
        "The office lamp is on a smart plug.",
        "Guests sleep in the loft.",
        "The hall sensor drops offline around 2am.",
    ]
    for text in texts:
        teach(home, admin_user, text)
    page = knowledge()
    expect(page.locator("#fact-list li.fact")).to_have_count(3)
    assert fact_texts(page) == texts[::-1]

    page.get_by_role("radio", name="Devices").check()

    expect(page.locator("#fact-list li.fact")).to_have_count(2)
    assert fact_texts(page) == [texts[2], texts[0]]
    expect(page).to_have_url(re.compile(r"chip=device"))

    page.get_by_role("radio", name="Everything").check()
    expect(page.locator("#fact-list li.fact")).to_have_count(3)
    expect(page).not_to_have_url(re.compile(r"chip=device"))
    page.get_by_label("Sort").select_option(label="Oldest first")

    expect(page).to_have_url(re.compile(r"sort=oldest"))
    expect(page.locator("#fact-list li.fact").first).to_contain_text(texts[0])
    assert fact_texts(page) == texts


def test_show_more_appends_the_next_facts_and_keeps_the_first_page(knowledge, home, admin_user):
    for text in demo.household_facts(FACTS_PER_PAGE + 15, seed=3):
        teach(home, admin_user, text)
    live = Fact.objects.for_memory(home).live().count()
    assert FACTS_PER_PAGE < live <= 2 * FACTS_PER_PAGE, live
    page = knowledge()
    rows = page.locator("#fact-list li.fact")
    expect(rows).to_have_count(FACTS_PER_PAGE)
    first_page = rows.evaluate_all("rows => rows.map(row => row.id)")

    page.get_by_role("link", name="Show more").click()

    expect(rows).to_have_count(live)
    shown = rows.evaluate_all("rows => rows.map(row => row.id)")
    assert shown[:FACTS_PER_PAGE] == first_page
    assert len(set(shown)) == live
    expect(page.get_by_role("link", name="Show more")).to_have_count(0)
    assert not_reloaded(page)


def test_a_forgotten_fact_can_be_undone_and_otherwise_leaves_after_a_few_seconds(
    knowledge, home, admin_user
):
    fact = teach(home, admin_user, "The loft is warm.").fact
    page = knowledge()
    row = page.locator(f"#fact-{fact.pk}")

    row.get_by_role("button", name="Forget “The loft is warm.”").click()
    expect(row.locator("s")).to_have_text("The loft is warm.")
    row.get_by_role("button", name="Undo").click()

    expect(row.locator(".fact-text")).to_have_text("The loft is warm.")
    expect(row.locator("s")).to_have_count(0)
    expect(page.locator("[data-waiting-count]")).to_have_text("1")

    row.get_by_role("button", name="Forget “The loft is warm.”").click()
    expect(row.get_by_role("button", name="Undo")).to_be_visible()
    expect(row).to_have_count(0, timeout=12_000)
    expect(page.locator("[data-waiting-count]")).to_have_text("0")


def test_undoing_a_filed_line_in_the_change_log_takes_it_out_of_the_document(
    knowledge, home, admin_user
):
    teach(home, admin_user, "Guests sleep in the loft.")
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    consolidator.execute(run.pk)
    page = knowledge()
    prose = page.locator("#document .prose")
    expect(prose).to_contain_text("Guests sleep in the loft.")
    added = page.locator("#changes li", has_text="Added under")
    expect(added).to_contain_text("“Guests sleep in the loft.”")
    added = page.locator(f"#{added.get_attribute('id')}")

    added.get_by_role("button", name=re.compile(r"^Undo change")).click()

    expect(prose).not_to_contain_text("Guests sleep in the loft.")
    expect(page.locator("#changes li").first).to_contain_text("Undid change #")
    expect(added).to_contain_text("undone")
    expect(added.get_by_role("button")).to_have_count(0)
    assert not_reloaded(page)


def test_markup_in_the_document_shows_as_text_and_never_runs(knowledge):
    page = knowledge()
    document = page.locator("#document")
    script = "<script>window.pwned=1</script>"
    image = '<img src=x onerror="window.pwned=1">'

    document.get_by_role("link", name="✎ Edit markdown").click()
    document.locator("textarea[name=text]").fill(f"# Memory\n\n## House\n\n{script}\n\n{image}\n")
    document.get_by_role("button", name="Save").click()

    prose = document.locator(".prose")
    expect(prose).to_contain_text(script)
    expect(prose).to_contain_text(image)
    assert page.evaluate("typeof window.pwned") == "undefined"
    page.reload()
    expect(prose).to_contain_text(script)
    expect(prose).to_contain_text(image)
    assert prose.locator("script, img").count() == 0
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_a_session_that_expired_mid_action_goes_to_sign_in_and_comes_back(
    knowledge, admin_user, password
):
    page = knowledge()
    page.context.clear_cookies()

    page.get_by_label("Teach it something").fill("Guests sleep in the loft.")
    page.get_by_role("button", name="Teach", exact=True).click()

    expect(page).to_have_url(re.compile(r"/login/\?next="))
    sign_in(page, admin_user.username, password)
    expect(page).to_have_url(re.compile(r"/knowledge/$"))
    expect(page.get_by_role("heading", name="House → Knowledge")).to_be_visible()
