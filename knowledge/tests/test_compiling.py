"""Compiling a source into facts on pages (memory/compiling.py): the seed's meeting notes become
facts on the Rossi Srl and Luca Bianchi pages, each citing its passage, read exactly as the
seed says by a Sales reader, an HR reader and an administrator on every surface; Sarah's
private note never reaches Tom; a passage placed on no page asks once in Review; a re-run
files nothing twice; learning off compiles nothing and says so."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from knowledge import compile_requests, passage_search, passages, retrieval, sources, visibility
from knowledge.models import (
    Citation,
    CompileRun,
    Fact,
    Label,
    Membership,
    Memory,
    PageType,
    Passage,
    Permission,
    ReviewItem,
    Role,
    Source,
    Subject,
)
from knowledge.tests.examples import MEETING_NOTES
from memory import compiling, consolidator
from memory.models import ConsolidationRun, DocumentRevision
from memory.tests.test_read_rules_property import _check
from surfaces import portable

ORDER = "Rossi Srl signed the order for €50,000, with delivery in June."
FOLLOWS = "Luca Bianchi follows the Rossi account from March."
SALARY = "Luca Bianchi moves to a salary of €45,000."


@dataclass
class Team:
    memory: Memory
    sales: Label
    hr: Label
    rossi: Subject
    luca: Subject
    sales_reader: object
    hr_reader: object
    admin: object


def _person(username: str):
    return get_user_model().objects.create_user(username=username, password="x")


def make_team() -> Team:
    """The seed's team memory before anything is added: Sales and HR with written meanings,
    a role for each, its two pages (Rossi Srl, called "Rossi" too), a Sales reader, an HR
    reader and an administrator."""
    memory = Memory.objects.create(slug="team", name="Team")
    sales = Label.objects.create(
        memory=memory, name="Sales", meaning="Customers, orders and the accounts we follow."
    )
    hr = Label.objects.create(memory=memory, name="HR", meaning="Pay, salaries and contracts.")
    for key, name, guidance in (
        ("company", "Company", "One customer or supplier: orders, terms, who follows it."),
        ("person", "Person", "One person: what they do, whom they follow, their pay."),
    ):
        PageType.objects.create(memory=memory, key=key, name=name, guidance=guidance)
    sales_role = Role.objects.create(memory=memory, name="Sales")
    sales_role.labels.add(sales)
    hr_role = Role.objects.create(memory=memory, name="HR")
    hr_role.labels.add(hr)
    sales_reader, hr_reader, admin = _person("giulia"), _person("marta"), _person("paolo")
    sales_role.members.add(sales_reader)
    hr_role.members.add(hr_reader)
    Membership.objects.create(memory=memory, user=admin, permission=Permission.ADMINISTER)
    rossi = Subject.objects.create(
        memory=memory, kind="company", name="Rossi Srl", aliases=["rossi"]
    )
    luca = Subject.objects.create(memory=memory, kind="person", name="Luca Bianchi")
    return Team(memory, sales, hr, rossi, luca, sales_reader, hr_reader, admin)


def add_meeting_notes(team: Team) -> Source:
    added = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text=MEETING_NOTES,
        title="meeting-notes.pdf",
        labels=[team.sales, team.hr],
    )
    return added.source


def compile_source(source: Source) -> CompileRun:
    """The run adding the source asked for, executed here as the worker would."""
    run = compile_requests.latest(source)
    assert run is not None and run.is_running
    compiling.execute(run.pk)
    run.refresh_from_db()
    return run


@pytest.fixture
def team(db):
    return make_team()


@pytest.fixture
def compiled(team):
    source = add_meeting_notes(team)
    run = compile_source(source)
    return source, run


def _by_text(memory) -> dict[str, Fact]:
    return {fact.text: fact for fact in Fact.objects.for_memory(memory)}


def test_compiling_the_meeting_notes_puts_each_fact_on_its_pages_citing_its_passage(team, compiled):
    source, run = compiled
    one, two, three = source.passages.order_by("ordinal")
    facts = _by_text(team.memory)

    assert run.state == CompileRun.State.COMPILED, run.reason
    assert run.message == "Compiled 3 passages: 3 new facts."
    assert sorted(facts) == sorted([ORDER, FOLLOWS, SALARY])
    assert [p.pk for p in facts[ORDER].passages.all()] == [one.pk]
    assert [p.pk for p in facts[FOLLOWS].passages.all()] == [two.pk]
    assert [p.pk for p in facts[SALARY].passages.all()] == [three.pk]
    assert set(facts[ORDER].subjects.all()) == {team.rossi}
    assert set(facts[FOLLOWS].subjects.all()) == {team.luca, team.rossi}
    assert set(facts[SALARY].subjects.all()) == {team.luca}
    assert all(p.compiled_at is not None for p in source.passages.all())
    assert facts[ORDER].source == source


def test_the_labeller_gives_the_passages_the_seeds_labels(team, compiled):
    source, _ = compiled
    labels = [[label.name for label in p.labels.all()] for p in source.passages.order_by("ordinal")]
    assert labels == [["Sales"], ["Sales"], ["HR"]]


def test_each_reader_reads_exactly_what_the_seed_says_on_every_surface(team, compiled):
    source, _ = compiled
    one, two, three = source.passages.order_by("ordinal")
    facts = _by_text(team.memory)
    texts = {fact.pk: text for text, fact in facts.items()}
    expected = {
        team.sales_reader: ({facts[ORDER].pk, facts[FOLLOWS].pk}, {one.pk, two.pk}),
        team.hr_reader: ({facts[SALARY].pk}, {three.pk}),
        team.admin: (set(texts), {one.pk, two.pk, three.pk}),
    }
    for person, (readable_facts, readable_passages) in expected.items():
        # the facts list, the API, the HTML list, search, context(), export and the MCP tools
        _check(team.memory, person, readable_facts, readable_passages, texts, team.luca)


def test_the_page_view_shows_a_reader_only_what_they_read_with_its_citations(
    client, team, compiled
):
    client.force_login(team.hr_reader)
    assert client.get(reverse("knowledge:page", args=[team.rossi.pk])).status_code == 404
    luca = client.get(reverse("knowledge:page", args=[team.luca.pk])).content.decode()
    assert "salary of €45,000" in luca and "Rossi account" not in luca
    assert "meeting-notes.pdf ¶3" in luca

    client.force_login(team.sales_reader)
    rossi = client.get(reverse("knowledge:page", args=[team.rossi.pk])).content.decode()
    assert "signed the order" in rossi and "Rossi account" in rossi and "45,000" not in rossi
    assert "meeting-notes.pdf ¶1" in rossi and "meeting-notes.pdf ¶2" in rossi
    luca = client.get(reverse("knowledge:page", args=[team.luca.pk])).content.decode()
    assert "Rossi account" in luca and "45,000" not in luca


def test_a_second_compile_files_nothing_again(team, compiled):
    source, _ = compiled
    before = Fact.objects.for_memory(team.memory).count()

    again = compiling.compile_now(source)

    assert again.state == CompileRun.State.NOTHING
    assert again.reason == "every passage was compiled before."
    assert Fact.objects.for_memory(team.memory).count() == before
    assert Fact.objects.get(text=ORDER).support == 1


def test_a_passage_compiled_twice_only_strengthens_its_fact(team, compiled):
    source, _ = compiled
    Passage.objects.filter(source=source).update(compiled_at=None)  # as if its worker died

    again = compiling.compile_now(source)

    assert again.state == CompileRun.State.COMPILED
    assert again.facts_filed == 0 and again.facts_known == 3
    assert Fact.objects.for_memory(team.memory).count() == 3


def test_a_new_version_compiles_only_its_new_text(team, compiled):
    source, _ = compiled
    newer = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text=MEETING_NOTES + "\n\nRossi Srl pays its invoices within 30 days.",
        title="meeting-notes.pdf",
        labels=[team.sales],
        previous=source,
    ).source

    run = compile_source(newer)

    assert run.passages_total == 1 and run.facts_filed == 1
    paid = Fact.objects.get(text="Rossi Srl pays its invoices within 30 days.")
    assert [p.source_id for p in paid.passages.all()] == [newer.pk]
    assert set(paid.subjects.all()) == {team.rossi}
    assert Fact.objects.for_memory(team.memory).count() == 4
    assert not newer.passages.filter(compiled_at=None).exists()


def test_questions_commands_and_secrets_are_never_filed(team):
    note = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text=(
            "Call Luca Bianchi tomorrow about the order.\n\n"
            "What does Rossi Srl pay for delivery?\n\n"
            "The alarm code for Rossi Srl is 4711.\n\n"
            "Rossi Srl pays its invoices within 30 days."
        ),
        labels=[team.sales],
    ).source

    run = compile_source(note)

    assert list(Fact.objects.for_memory(team.memory).values_list("text", flat=True)) == [
        "Rossi Srl pays its invoices within 30 days."
    ]
    assert run.facts_filed == 1
    notes = " ".join(run.notes)
    assert "a one-off command" in notes and "a question" in notes and "a secret" in notes


def test_a_passage_placed_on_no_page_asks_once_in_review_and_is_placed_once_its_page_exists(
    team,
):
    note = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text="Bianco Spa asked for a quote in May.\n\nThe warehouse closes in August.\n\n"
        "Rossi Srl pays its invoices within 30 days.",
        labels=[team.sales],
    ).source

    run = compile_source(note)

    items = ReviewItem.objects.filter(source=note, kind=ReviewItem.Kind.UNPLACED)
    (item,) = items
    first, second, _third = note.passages.order_by("ordinal")
    assert set(item.passages.all()) == {first, second}
    assert item.question.startswith(f"2 passages of “{note.title}” could not be placed")
    assert run.unplaced == 2
    assert "2 passages were placed on no page (see Review)" in run.message
    assert Fact.objects.get(text="The warehouse closes in August.").subjects.count() == 0

    bianco = Subject.objects.create(memory=team.memory, kind="company", name="Bianco Spa")
    again = compile_requests.compile_again(note, by=team.admin)
    compiling.execute(again.pk)

    item.refresh_from_db()
    assert list(item.passages.all()) == [second]
    assert item.state == ReviewItem.State.OPEN
    assert item.question.startswith("1 passage of")
    quote = Fact.objects.get(text="Bianco Spa asked for a quote in May.")
    assert list(quote.subjects.all()) == [bianco]
    assert items.count() == 1
    assert Fact.objects.for_memory(team.memory).count() == 3  # placed, never filed twice


def test_a_compile_asked_for_with_learning_off_never_runs_and_the_source_view_says_so(client, team):
    Memory.objects.filter(pk=team.memory.pk).update(learning=False)
    team.memory.refresh_from_db()

    added = sources.add_source(
        memory=team.memory, by=team.admin, text=MEETING_NOTES, labels=[team.sales]
    )

    assert "Learning is switched off" in added.message
    assert not CompileRun.objects.exists()
    client.force_login(team.admin)
    view = client.get(reverse("knowledge:source", args=[added.source.pk])).content.decode()
    assert "Learning is switched off: this source is not compiled" in view
    assert "Compile again" not in view
    refused = client.post(
        reverse("knowledge:compile-source", args=[added.source.pk]),
        headers={"HX-Request": "true"},
    )
    assert "Learning is switched off for Team" in refused.headers["HX-Trigger"]
    assert not CompileRun.objects.exists() and not Fact.objects.for_memory(team.memory).exists()


def test_learning_switched_off_before_the_run_starts_files_nothing_and_says_why(team):
    source = add_meeting_notes(team)
    Memory.objects.filter(pk=team.memory.pk).update(learning=False)

    run = compile_source(source)

    assert run.state == CompileRun.State.NOTHING
    assert run.message == "Compiled nothing: learning was switched off before it ran."
    assert not Fact.objects.for_memory(team.memory).exists()


def test_the_source_view_shows_how_far_a_compile_has_got_and_offers_compile_again(
    client, team, compiled
):
    source, _ = compiled
    client.force_login(team.admin)
    done = client.get(reverse("knowledge:source", args=[source.pk])).content.decode()
    assert "Compiled 3 passages: 3 new facts." in done and "Compile again" in done

    CompileRun.objects.create(
        memory=team.memory,
        source=source,
        passages_total=40,
        passages_done=12,
        lease_expires_at=source.created_at,
    )
    running = client.get(reverse("knowledge:source", args=[source.pk])).content.decode()
    assert "Compiling: 12 of 40 passages" in running
    assert reverse("knowledge:compile-status", args=[source.pk]) in running  # polled

    client.force_login(team.sales_reader)
    shown = client.get(reverse("knowledge:source", args=[source.pk])).content.decode()
    assert "Compiling: 12 of 40 passages" in shown and "Compile again" not in shown


def test_compile_again_asks_for_a_run_on_a_worker_and_only_an_administrator_may(
    client, team, compiled, django_capture_on_commit_callbacks, monkeypatch
):
    source, _ = compiled
    sent = []
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *a: sent.append(a))
    client.force_login(team.sales_reader)
    refused = client.post(reverse("knowledge:compile-source", args=[source.pk]))
    assert refused.status_code == 403

    client.force_login(team.admin)
    asked = client.post(reverse("knowledge:compile-source", args=[source.pk]))

    assert asked.status_code == 302
    run = compile_requests.latest(source)
    assert run.is_running and sent == [("memory.tasks.compile_source", run.pk)]
    again = client.post(reverse("knowledge:compile-source", args=[source.pk]))
    assert again.status_code == 302 and len(sent) == 1  # one run at a time per source


def test_the_polled_region_says_when_a_compile_landed(client, team, compiled):
    source, _ = compiled
    client.force_login(team.sales_reader)
    polled = client.get(
        reverse("knowledge:compile-status", args=[source.pk]) + "?running=1",
        headers={"HX-Request": "true"},
    )
    assert polled.status_code == 200
    assert "Compiled 3 passages" in polled.content.decode()
    assert "sourceCompiled" in polled.headers["HX-Trigger"]


# Sarah's private note, compiled -----------------------------------------------------------------

PRIVATE_NOTE = "I take metformin every morning with breakfast."


@pytest.fixture
def household(home, django_user_model):
    sarah = django_user_model.objects.create_user(username="sarah", first_name="Sarah")
    tom = django_user_model.objects.create_user(username="tom", first_name="Tom")
    for person in (sarah, tom):
        Membership.objects.create(memory=home, user=person, permission=Permission.CURATE)
    visibility.default_labels(home)  # Household, which everyone reads, as in any home in use
    private = Label.objects.create(
        memory=home, name="Private to Sarah", meaning="Sarah's own health and medical notes."
    )
    role = Role.objects.create(memory=home, name="Sarah")
    role.labels.add(private)
    role.members.add(sarah)
    page = Subject.objects.create(memory=home, kind="person", name="Sarah")
    shared = sources.add_source(
        memory=home, by=tom, text="Sarah walks the dog every morning at seven."
    ).source
    compile_source(shared)
    note = sources.add_source(
        memory=home, by=sarah, text=PRIVATE_NOTE, title="Health", labels=[private]
    ).source
    run = compile_source(note)
    return {"sarah": sarah, "tom": tom, "note": note, "run": run, "page": page}


def test_sarahs_private_note_compiled_is_hers_and_never_reaches_tom_anywhere(
    client, home, household
):
    sarah, tom, note = household["sarah"], household["tom"], household["note"]
    fact = Fact.objects.get(text="Sarah takes metformin every morning with breakfast.")
    assert household["run"].facts_filed == 1
    assert list(fact.subjects.all()) == [household["page"]]
    walks = Fact.objects.get(text="Sarah walks the dog every morning at seven.")
    texts = {fact.pk: fact.text, walks.pk: walks.text}
    passages = Passage.objects.for_memory(home)
    _check(
        home,
        tom,
        {walks.pk},
        set(passages.exclude(source=note).values_list("pk", flat=True)),
        texts,
        household["page"],
    )
    _check(
        home, sarah, {fact.pk, walks.pk}, set(passages.values_list("pk", flat=True)), texts,
        household["page"],
    )  # fmt: skip

    question = "What does Sarah take every morning?"
    assert "metformin" not in retrieval.context(memory=home, question=question, reader=tom).text
    assert "metformin" in retrieval.context(memory=home, question=question, reader=sarah).text
    assert "metformin" not in str(portable.export_memory(home, reader=tom))
    assert not passage_search.matching(home, tom, "metformin").exists()

    client.force_login(tom)
    page = client.get(reverse("knowledge:page", args=[household["page"].pk])).content.decode()
    assert "walks the dog" in page and "metformin" not in page
    assert client.get(reverse("knowledge:source", args=[note.pk])).status_code == 404
    found = client.get(reverse("knowledge-api:passages"), {"q": "metformin"}).json()
    assert found["count"] == 0 and found["results"] == []
    listed = client.get(reverse("knowledge:sources"), {"q": "metformin"}).content.decode()
    assert 'data-passages-count="0"' in listed
    assert "breakfast" not in listed and "Health" not in listed
    timeline = str(client.get(reverse("review-api:timeline")).json())
    assert "walks the dog" in timeline and "metformin" not in timeline
    logbook = client.get(reverse("review:timeline")).content.decode()
    assert "walks the dog" in logbook and "metformin" not in logbook

    client.force_login(sarah)
    assert "metformin" in str(client.get(reverse("review-api:timeline")).json())
    assert "metformin" in client.get(reverse("review:timeline")).content.decode()


def test_a_first_person_note_is_filed_as_said_by_whoever_added_it(household):
    fact = Fact.objects.get(text="Sarah takes metformin every morning with breakfast.")
    assert fact.taught_by == household["sarah"]
    assert Citation.objects.get(fact=fact).passage.source == household["note"]


def test_what_a_compile_left_out_is_said_without_the_words_of_a_passage(client, team):
    note = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text="Rossi Srl signed the order for €50,000.\n\nWill Luca Bianchi's salary go up in May?",
        labels=[team.sales, team.hr],
    ).source
    run = compile_source(note)
    assert run.notes == ["passage 2: left out a question"]

    client.force_login(team.sales_reader)
    shown = client.get(reverse("knowledge:source", args=[note.pk])).content.decode()
    assert "passage 2: left out a question" in shown
    assert "salary" not in shown and "go up" not in shown


def test_the_sweep_starts_again_a_compile_nobody_took_and_one_whose_worker_died(team, monkeypatch):
    sent = []
    monkeypatch.setattr(compiling, "send_on_commit", lambda *args: sent.append(args))
    source = add_meeting_notes(team)
    waiting = compile_requests.latest(source)
    compiling.sweep()
    assert sent == []  # asked for a moment ago: its message is on its way

    long_ago = waiting.started_at - compile_requests.LEASE * 2
    CompileRun.objects.filter(pk=waiting.pk).update(started_at=long_ago)
    compiling.sweep()
    assert sent == [("memory.tasks.compile_source", waiting.pk)]

    CompileRun.objects.filter(pk=waiting.pk).update(
        claimed_at=long_ago, executor="gone:1", lease_expires_at=long_ago
    )
    compiling.execute(waiting.pk)  # the redelivered message takes it over
    waiting.refresh_from_db()
    assert waiting.state == CompileRun.State.COMPILED and waiting.facts_filed == 3


def test_a_passage_only_hr_reads_never_restates_a_fact_sales_reads(team, compiled):
    order = Fact.objects.get(text=ORDER)
    note = sources.add_source(
        memory=team.memory, by=team.admin, text=ORDER, title="Pay review", labels=[team.hr]
    ).source

    run = compile_source(note)

    assert run.facts_filed == 1 and run.facts_known == 0
    order.refresh_from_db()
    assert order.support == 1
    assert not order.observations.filter(source=note).exists()  # Sales never sees "Pay review"
    again = Fact.objects.exclude(pk=order.pk).get(text=ORDER)
    assert list(Fact.objects.filter(pk=again.pk).readable_by(team.hr_reader)) == [again]
    assert not Fact.objects.filter(pk=again.pk).readable_by(team.sales_reader).exists()


MOVE = "Rossi Srl moves its office to Milan in May."


def _fact_both_read(team: Team) -> Fact:
    """A fact about Rossi Srl citing a passage labelled Sales and HR: both read it."""
    minutes = sources.add_source(
        memory=team.memory, by=team.admin, text=MOVE, title="Minutes", labels=[team.sales, team.hr]
    ).source
    passages.set_labels(list(minutes.passages.all()), [team.sales, team.hr])
    compile_source(minutes)
    fact = Fact.objects.get(text=MOVE)
    assert Fact.objects.filter(pk=fact.pk).readable_by(team.hr_reader).exists()
    assert Fact.objects.filter(pk=fact.pk).readable_by(team.sales_reader).exists()
    return fact


def test_a_sales_note_never_restates_a_fact_hr_people_read_too(team):
    move = _fact_both_read(team)
    note = sources.add_source(
        memory=team.memory, by=team.admin, text=MOVE, title="Call with Rossi", labels=[team.sales]
    ).source

    run = compile_source(note)

    assert (run.facts_filed, run.facts_known) == (1, 0)
    move.refresh_from_db()
    assert move.support == 1
    assert not move.observations.filter(source=note).exists()  # HR never sees "Call with Rossi"
    again = Fact.objects.exclude(pk=move.pk).get(text=MOVE)
    assert Fact.objects.filter(pk=again.pk).readable_by(team.sales_reader).exists()
    assert not Fact.objects.filter(pk=again.pk).readable_by(team.hr_reader).exists()


def test_a_note_with_the_labels_of_the_fact_it_restates_strengthens_it(team):
    move = _fact_both_read(team)
    note = sources.add_source(
        memory=team.memory,
        by=team.admin,
        text=MOVE,
        title="Minutes, again",
        labels=[team.sales, team.hr],
    ).source
    passages.set_labels(list(note.passages.all()), [team.sales, team.hr])

    run = compile_source(note)

    assert (run.facts_filed, run.facts_known) == (0, 1)
    move.refresh_from_db()
    assert move.support == 2 and move.observations.filter(source=note).exists()


def test_what_a_person_writes_of_themselves_lands_on_their_page_made_if_need_be(home, alice):
    alice.first_name = "Alice"
    alice.save()
    note = sources.add_source(
        memory=home, by=alice, text="I like the bedroom at 19 degrees in winter."
    ).source

    run = compile_source(note)

    fact = Fact.objects.get(text="Alice likes the bedroom at 19 degrees in winter.")
    (page,) = fact.subjects.all()
    assert (page.name, page.kind) == ("Alice", "person")
    assert run.unplaced == 0 and fact.taught_by == alice


def test_sarahs_compiled_note_never_reaches_the_document_everyone_reads(home, household):
    request = consolidator.request_consolidation(
        memory=home, trigger=ConsolidationRun.Trigger.CLI, send=False
    )
    consolidator.execute(request.run.pk)

    run = ConsolidationRun.objects.get(pk=request.run.pk)
    revision = DocumentRevision.objects.current(home)
    assert run.state == ConsolidationRun.State.FILED, run.reason
    assert "walks the dog" in revision.text
    assert "metformin" not in revision.text and "metformin" not in revision.voice
    assert "1 fact kept out of the document: not everyone in the memory may read it." in (
        run.reason
    )


def test_the_terminal_asks_for_a_compile_again_and_refuses_while_learning_is_off(
    team, compiled, monkeypatch
):
    source, _ = compiled
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *args: None)
    out = io.StringIO()
    call_command("sources", "--memory", "team", "compile", str(source.pk), stdout=out)
    run = compile_requests.latest(source)
    assert run.is_running and f"compile #{run.pk} asked for" in out.getvalue()

    with pytest.raises(CommandError, match="This needs permission to"):
        call_command("sources", "--memory", "team", "--as", "giulia", "compile", str(source.pk))
    CompileRun.objects.filter(pk=run.pk).update(state=CompileRun.State.FAILED)
    Memory.objects.filter(pk=team.memory.pk).update(learning=False)
    with pytest.raises(CommandError, match="Learning is switched off for Team"):
        call_command("sources", "--memory", "team", "compile", str(source.pk))


def test_compile_runs_are_in_the_admin_for_those_who_administer_the_memory_only(
    client, team, compiled
):
    _, run = compiled
    url = reverse("admin:knowledge_compilerun_changelist")
    for person in (team.admin, team.sales_reader):
        person.is_staff = True
        person.save()

    client.force_login(team.admin)
    listed = client.get(url).content.decode()
    assert f'href="/admin/knowledge/compilerun/{run.pk}/change/' in listed

    client.force_login(team.sales_reader)
    shown = client.get(url)
    assert f"/admin/knowledge/compilerun/{run.pk}/" not in shown.content.decode()
    opened = client.get(reverse("admin:knowledge_compilerun_change", args=[run.pk]))
    assert opened.status_code in (302, 404)  # the run's statements hold every passage's words


def test_the_api_says_how_far_a_compile_got_and_asks_for_another(
    client, team, compiled, monkeypatch
):
    source, run = compiled
    url = reverse("knowledge-api:source-compile", args=[source.pk])
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *args: None)

    client.force_login(team.sales_reader)
    shown = client.get(url).json()
    assert shown["id"] == run.pk and shown["state"] == "compiled"
    assert shown["message"] == "Compiled 3 passages: 3 new facts."
    assert (shown["passages_done"], shown["passages_total"]) == (3, 3)
    assert client.post(url).status_code == 403

    client.force_login(team.admin)
    asked = client.post(url)
    assert asked.status_code == 202 and asked.json()["state"] == "running"
    assert client.post(url).json()["id"] == asked.json()["id"]  # one run at a time

    CompileRun.objects.filter(pk=asked.json()["id"]).update(state=CompileRun.State.FAILED)
    Memory.objects.filter(pk=team.memory.pk).update(learning=False)
    refused = client.post(url)
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("Learning is switched off for Team")


def test_the_api_never_shows_a_compile_of_a_source_the_reader_cannot_read(
    client, team, compiled, django_user_model
):
    source, _ = compiled
    stranger = django_user_model.objects.create_user(username="stranger")
    client.force_login(stranger)
    answer = client.get(reverse("knowledge-api:source-compile", args=[source.pk]))
    assert answer.status_code == 404
    assert "meeting-notes" not in answer.content.decode()


def test_a_sentence_opening_on_my_is_written_as_the_authors_own(home, alice):
    alice.first_name = "Alice"
    alice.save()
    note = sources.add_source(memory=home, by=alice, text="My bike is kept in the garage.").source

    compile_source(note)

    fact = Fact.objects.get(text="Alice's bike is kept in the garage.")
    assert [page.name for page in fact.subjects.all()] == ["Alice"]


def test_the_terminal_asks_to_compile_every_source_added_before_compiling_existed(
    team, monkeypatch
):
    sent = []
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *args: sent.append(args))
    older = Source.objects.create(
        memory=team.memory, kind=Source.Kind.DOCUMENT, title="old.md", text=MEETING_NOTES
    )
    passages.add(older, passages.cut(MEETING_NOTES), labels=[team.sales])
    conversation = Source.objects.create(
        memory=team.memory, kind=Source.Kind.CONVERSATION, title="chat", text="Hello there."
    )
    passages.add(conversation, ["Hello there, Rossi Srl."], labels=[team.sales])
    out = io.StringIO()

    call_command("sources", "--memory", "team", "compile", "--all", stdout=out)

    assert out.getvalue().startswith("Asked for 1 compile; a worker compiles them")
    (run,) = CompileRun.objects.all()
    assert run.source == older and sent == [("memory.tasks.compile_source", run.pk)]
    with pytest.raises(CommandError, match="Name one source"):
        call_command("sources", "--memory", "team", "compile")
