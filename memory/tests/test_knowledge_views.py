"""The Knowledge tab over plain requests and htmx requests (the browser tests click it)."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from knowledge.models import Fact, Subject
from memory import actions, consolidator, revisions
from memory.demo import household_facts
from memory.models import ConsolidationRun, DocumentRevision, InboxItem
from memory.taught import Statement

HTMX = {"HX-Request": "true"}


def _teach(home, count, seed=1):
    for text in household_facts(count, seed=seed):
        actions.learn(Statement.typed(memory=home, text=text, origin="typed"))


def test_the_tab_shows_every_section_with_the_seed_wording(signed_in, home):
    actions.learn(Statement.said(memory=home, text="The loft is warm.", origin="voice"))

    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    for words in (
        "This morning’s brief",
        "fact known",
        "waiting to be filed",
        "open guesses",
        "rules you set",
        "last filed",
        "Correcting it here is how you stop brain saying something.",
        "File into memory now files them.",
        "who taught it and when.",
        "✎ Edit markdown",
        "Teach it something",
        "The loft is warm.",
        "from a voice conversation",
        "What changed, and why",
    ):
        assert words in page


def test_the_tab_costs_the_same_number_of_queries_for_30_or_90_facts(
    signed_in, home, django_assert_max_num_queries
):
    Subject.objects.create(memory=home, kind="room", name="Kitchen")
    _teach(home, 30)
    with django_assert_max_num_queries(40) as small:
        signed_in.get(reverse("memory:knowledge"))
    _teach(home, 60, seed=2)

    with django_assert_max_num_queries(len(small.captured_queries)):
        signed_in.get(reverse("memory:knowledge"))


def test_a_long_queue_lists_the_next_to_be_filed_and_counts_them_all(signed_in, home, monkeypatch):
    from surfaces.views import knowledge as views

    monkeypatch.setattr(views, "WAITING_SHOWN", 2)
    for text in ("The loft is warm.", "The cellar is damp.", "The porch light is broken."):
        actions.learn(Statement.typed(memory=home, text=text, origin="typed"))

    for url, headers in ((reverse("memory:knowledge"), {}), (reverse("memory:waiting"), HTMX)):
        page = signed_in.get(url, headers=headers).content.decode()
        queue = page[page.index('<div id="waiting"') :].split("</section>")[0]

        assert "<strong data-waiting-count>3</strong> waiting" in queue
        assert "The loft is warm." in queue and "The cellar is damp." in queue
        assert "The porch light is broken." not in queue
        assert "The next 2 to be filed are shown; 3 wait in all." in queue


def test_a_short_queue_lists_every_item_and_no_more_line(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))

    page = signed_in.get(reverse("memory:waiting"), headers=HTMX).content.decode()

    assert "<strong data-waiting-count>1</strong> waiting" in page
    assert "The loft is warm." in page and "data-waiting-more" not in page


def test_a_filter_answers_with_the_list_and_moves_the_address_bar(signed_in, home):
    Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id="light.office_lamp",
        aliases=["the beacon"],
    )
    actions.learn(
        Statement.typed(memory=home, text="The office lamp flickers at dusk.", origin="typed")
    )
    actions.learn(
        Statement.typed(memory=home, text="The kettle is descaled monthly.", origin="typed")
    )

    response = signed_in.get(
        reverse("memory:facts"), {"q": "beacon", "chip": "device"}, headers=HTMX
    )

    body = response.content.decode()
    assert "The office lamp flickers at dusk." in body
    assert "kettle" not in body
    assert response["HX-Push-Url"] == "/knowledge/?q=beacon&chip=device"


def test_show_more_answers_only_the_next_rows(signed_in, home):
    _teach(home, 75)

    response = signed_in.get(reverse("memory:facts"), {"page": 2}, headers=HTMX)

    body = response.content.decode()
    assert body.count('class="fact"') == Fact.objects.live().count() - 50 > 0
    assert 'id="fact-filters"' not in body


def test_teaching_without_javascript_redirects_with_a_message(signed_in, home):
    response = signed_in.post(reverse("memory:teach"), {"text": "The loft is warm."}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("memory:knowledge")
    assert "brain learned “The loft is warm.”" in response.content.decode()
    assert InboxItem.objects.pending().count() == 1


def test_a_refused_fact_keeps_the_text_and_names_the_problem(signed_in, home):
    response = signed_in.post(
        reverse("memory:teach"), {"text": "The door code is 4711"}, headers=HTMX
    )

    body = response.content.decode()
    assert "brain does not keep secrets" in body
    assert 'value="The door code is 4711"' in body


def test_pressing_file_now_twice_starts_one_pass(
    signed_in, home, django_capture_on_commit_callbacks
):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))

    with django_capture_on_commit_callbacks():
        first = signed_in.post(reverse("memory:file-now"), headers=HTMX)
        second = signed_in.post(reverse("memory:file-now"), headers=HTMX)

    assert ConsolidationRun.objects.count() == 1
    assert "Filing…" in first.content.decode()
    assert "already running" in second["HX-Trigger"]


def test_a_pass_nobody_picks_up_says_the_worker_may_be_down(signed_in, home):
    run = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    ConsolidationRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(minutes=5)
    )

    body = signed_in.get(reverse("memory:banner", args=[run.pk]), headers=HTMX).content.decode()

    assert "still waiting for a worker after 5 min — the worker may be down" in body


def test_a_finished_pass_reports_its_outcome_and_refreshes_the_tab(signed_in, home):
    signed_in.post(reverse("memory:file-now"), headers=HTMX)
    run = ConsolidationRun.objects.get()

    consolidator.execute(run.pk)

    response = signed_in.get(reverse("memory:banner", args=[run.pk]), headers=HTMX)
    assert "Filed 0 items. Nothing was waiting to be filed." in response.content.decode()
    assert "memoryChanged" in response["HX-Trigger"]
    assert "every 1s" not in response.content.decode()


def test_a_pass_asked_for_elsewhere_refreshes_the_tab_but_does_not_pop_up(signed_in, home):
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    running = signed_in.get(reverse("memory:knowledge")).content.decode()
    assert "Filing…" in running  # while it runs, the tab says so

    consolidator.execute(run.pk)

    response = signed_in.get(reverse("memory:banner", args=[run.pk]), headers=HTMX)
    assert "Filed 0 items" not in response.content.decode()
    assert "memoryChanged" in response["HX-Trigger"]


def test_an_edit_over_a_newer_document_shows_both_and_overwrites_nothing(signed_in, home):
    revisions.save_user_edit(memory=home, text="# Memory\n\n- Theirs.\n", base_generation=0)

    response = signed_in.post(
        reverse("memory:save-document"),
        {"text": "# Memory\n\n- Mine.\n", "base_generation": 0},
        headers=HTMX,
    )

    body = response.content.decode()
    assert "The document changed since you opened the editor" in body
    assert "- Mine." in body and "- Theirs." in body
    assert DocumentRevision.objects.current(home).text == "# Memory\n\n- Theirs.\n"


def test_markup_in_the_document_renders_inert(signed_in, home):
    revisions.save_user_edit(
        memory=home,
        base_generation=0,
        text="# Memory\n\n- <script>alert(1)</script>\n\n<img src=x "
        "onerror=alert(1)>\n- [x](javascript:alert(1))\n",
    )

    body = signed_in.get(reverse("memory:document"), headers=HTMX).content.decode()

    assert "<script>" not in body and "<img" not in body and 'href="javascript' not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_export_downloads_the_file(signed_in, home):
    page = signed_in.get(reverse("memory:knowledge")).content.decode()
    assert f'href="{reverse("memory-api:export")}" download' in page
    response = signed_in.get(reverse("memory-api:export"))

    assert response["Content-Disposition"].startswith('attachment; filename="brain-home-')
    assert response.json()["format"] == "brain-export"


def test_see_the_run_opens_where_a_fact_came_from(signed_in, home, admin_user):
    fact = actions.learn(
        Statement.said(memory=home, text="The loft is warm.", origin="voice", by=admin_user)
    ).fact

    page = signed_in.get(reverse("knowledge:source", args=[fact.source_id])).content.decode()

    assert "A voice conversation by ada" in page
    assert "The loft is warm." in page
    assert signed_in.get(reverse("knowledge:sources")).status_code == 200
