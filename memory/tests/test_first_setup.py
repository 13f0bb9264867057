"""A first setup: a memory with nothing in it greets the person with three steps (teach a first
fact, add a source, run a study session) and lists what each study session found as it lands;
only a session started on the page pops up on it."""

import re

from django.urls import reverse

from knowledge import sources
from memory import actions, demo, study
from memory.taught import Statement
from surfaces.views.study import FIRST_SETUP_UNTIL

HTMX = {"HX-Request": "true"}


def _steps(page: str) -> list[tuple[str, bool]]:
    card = re.search(r'<section id="first-setup".*?</section>', page, flags=re.S)
    assert card, "no first setup"
    return [
        (re.sub(r"<[^>]+>", "", title), "done" in classes)
        for classes, title in re.findall(
            r'<li class="([^"]*)">\s*<strong>(.*?)</strong>', card.group(), flags=re.S
        )
    ]


def test_an_empty_memory_greets_with_three_steps_on_house_and_knowledge(signed_in, home):
    for path in (reverse("home"), reverse("memory:knowledge")):
        page = signed_in.get(path).content.decode()
        assert _steps(page) == [
            ("Teach it a first fact.", False),
            ("Add a source.", False),
            ("Run a study session.", False),
        ], path
        assert "make demo" not in page


def test_each_step_is_marked_done_as_it_is_done(signed_in, home, admin_user):
    actions.learn(
        Statement.typed(
            memory=home, text="The loft is warm in summer.", origin="typed", by=admin_user
        )
    )
    sources.add_source(memory=home, by=admin_user, title="Boiler", text="The boiler is old.")

    page = signed_in.get(reverse("home")).content.decode()

    assert [done for _, done in _steps(page)] == [True, True, False]


def test_a_study_session_started_on_the_page_lists_what_it_found_as_it_lands(signed_in, home):
    for text in ("The loft is warm in summer.", "The loft has two skylights."):
        actions.learn(Statement.typed(memory=home, text=text, origin="typed"))
    started = signed_in.post(reverse("memory:study"), {"topic": "loft"}, headers=HTMX)
    assert "Studying loft" in started.content.decode()
    session = study.StudySession.objects.as_system("the test").get()
    running = signed_in.get(reverse("memory:first-setup"), headers=HTMX).content.decode()
    assert "every 3s" in running and "Studying loft…" in running

    study.execute(session.pk)
    banner = signed_in.get(reverse("memory:study-status", args=[session.pk]), headers=HTMX)
    listed = signed_in.get(reverse("memory:first-setup"), headers=HTMX).content.decode()

    assert "studyLanded" in banner.headers["HX-Trigger"]
    assert "Studied loft: read 2 facts." in banner.content.decode()
    assert "#" not in re.sub(r"<[^>]+>|&#x?\w+;", "", banner.content.decode())
    assert "Studied loft: read 2 facts." in listed
    assert "every 3s" not in listed
    assert [done for _, done in _steps(listed)][2] is True


def test_a_session_started_elsewhere_shows_while_it_runs_but_does_not_pop_up(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm in summer.", origin="typed"))
    session = study.start(memory=home, topic="loft", send=False).session  # brain learn loft

    running = signed_in.get(reverse("memory:knowledge")).content.decode()
    assert "Studying loft" in running

    study.execute(session.pk)
    landed = signed_in.get(reverse("memory:study-status", args=[session.pk]), headers=HTMX)
    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    assert "data-study-report" not in landed.content.decode()
    assert "data-study-report" not in page
    assert "Studied loft" in page  # in the first setup's list, not in a banner


def test_a_memory_that_knows_enough_shows_no_first_setup(signed_in, home):
    for text in demo.household_facts(FIRST_SETUP_UNTIL + 2, seed=5):
        actions.learn(Statement.typed(memory=home, text=text, origin="typed"))

    for path in (reverse("home"), reverse("memory:knowledge")):
        assert 'id="first-setup"' not in signed_in.get(path).content.decode()
