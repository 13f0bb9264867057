"""The read layer's rules, held by tests rather than by memory: a query of labelled rows names
its reader or fails; every ``as_system`` says why; every model that points at a labelled row
reads through the layer or says here why it need not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.db.models import Prefetch

from knowledge.models import Fact, Passage, Source, Subject
from knowledge.read_layer import SYSTEM, ReaderMissing, ReadQuerySet
from knowledge.tests import examples

# Models that point at a labelled row and read without the layer, each with its reason.
NEEDS_NO_READER = {
    "knowledge.Citation": "a join row: read through the fact and the passage it joins",
    "knowledge.PassageLabel": "a join row of labels, which are names, not content",
    "knowledge.LabellingRule": "an administrator's rule: labels and a page's id, no content",
    "knowledge.CompileRun": "a run log only those who administer its memory see (the admin's "
    "RunLogAdmin; the source view shows its progress to readers of the source)",
    "memory.ReflectionRun": "a run log only those who administer its memory see",
    "review.Finding": "the house's: a check's words about a device, read by every member",
    "review.Rule": "the house's: a person's 'not a problem' about a device",
    "review.Guess": "the house's: a yes/no guess about a device or a routine",
    "review.Judgement": "the house's: arithmetic over findings, about a device",
    "review.HouseEvent": "the house's: a device's state change",
    "agent.Procedure": "an agent's own steps, read by those who read its memory",
}
LABELLED = {"knowledge.Fact", "knowledge.Passage", "knowledge.Source", "knowledge.Subject"}


@pytest.fixture
def team(db):
    return examples.team()


def as_application_code(line: str, **names):
    """Run ``line`` as a module of the application would (a test's own lines read what they
    arranged as the system: ``read_layer._asked_by_a_test``)."""
    scope = dict(names)
    exec(
        compile(f"found = {line}", str(Path(settings.BASE_DIR, "knowledge", "x.py")), "exec"), scope
    )
    return scope["found"]


def test_a_query_of_labelled_rows_that_names_no_reader_fails_in_application_code(team):
    unnamed = Fact.objects.filter(memory=team.memory)
    for line in ("rows.count()", "list(rows)", "rows.exists()", "rows.first()", "len(rows)"):
        with pytest.raises(ReaderMissing, match="without a reader"):
            as_application_code(line, rows=unnamed)
    assert (
        as_application_code("rows.readable_by(person).count()", rows=unnamed, person=team.hr_reader)
        == 1
    )
    assert as_application_code("rows.as_system('the test').count()", rows=unnamed) == 4
    assert as_application_code("rows.none().count()", rows=unnamed) == 0


def test_readable_by_none_fails_and_names_the_way_out(team):
    with pytest.raises(ReaderMissing, match=r"as_system\(why\)"):
        Fact.objects.readable_by(None)


def test_as_system_needs_a_reason():
    with pytest.raises(ValueError):
        Fact.objects.as_system("  ")


def test_a_related_manager_and_a_prefetch_are_queries_like_any_other(team):
    source = Source.objects.as_system("the test").get(pk=team.source.pk)
    with pytest.raises(ReaderMissing):
        as_application_code("source.passages.count()", source=source)
    pages = Subject.objects.as_system("the test").filter(pk=team.luca.pk)
    with pytest.raises(ReaderMissing):
        as_application_code("list(pages.prefetch_related('facts'))", pages=pages)
    named = pages.prefetch_related(Prefetch("facts", queryset=Fact.objects.as_system("the test")))
    assert len(next(iter(named)).facts.all()) == 2


def test_the_pages_and_passages_of_a_fact_are_read_with_the_fact(team):
    fact = Fact.objects.readable_by(team.sales_reader).get(pk=team.order.pk)
    assert [page.name for page in fact.subjects.all()] == ["Rossi Srl"]
    assert fact.passages.count() == 1


def test_a_reader_named_once_holds_through_every_clone(team):
    read = Fact.objects.readable_by(team.hr_reader).filter(memory=team.memory)
    chained = read.order_by("pk").exclude(text="").values_list("text", flat=True)
    assert chained.reader is team.hr_reader
    assert list(chained) == ["Salary: €45,000."]


def test_a_delete_needs_no_reader(team):
    Passage.objects.filter(pk=-1).delete()
    assert Fact.objects.readable_by(SYSTEM).count() == 4


def test_every_as_system_in_the_code_says_why_in_words():
    found = 0
    for path in Path(settings.BASE_DIR).rglob("*.py"):
        if {".venv", "migrations", "tests"} & set(path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "as_system"):
                continue
            found += 1
            (reason,) = node.args
            words = reason.value if isinstance(reason, ast.Constant) else None
            if isinstance(reason, ast.Name | ast.JoinedStr):  # a module's named reason
                continue
            assert isinstance(words, str) and len(words.split()) >= 2, f"{path}:{node.lineno}"
    assert found > 50


def test_every_model_that_points_at_labelled_rows_reads_through_the_layer_or_says_why():
    unexplained = []
    for model in apps.get_models():
        label = model._meta.label
        if label in NEEDS_NO_READER or model._meta.app_label not in (
            "knowledge",
            "memory",
            "review",
            "agent",
        ):
            continue
        points = any(
            getattr(field, "related_model", None) is not None
            and field.related_model._meta.label in LABELLED
            for field in model._meta.get_fields()
            if field.is_relation and not field.auto_created  # what it points at, not what at it
        )
        if (points or label in LABELLED) and not isinstance(
            model._default_manager.all(), ReadQuerySet
        ):
            unexplained.append(label)
    assert unexplained == []
