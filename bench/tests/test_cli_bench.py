"""The terminal benchmark times commands that did their work: a list that printed the memory,
an add that taught a fact (a benchmark of a refusal would look fast)."""

import pytest
from django.db import connection

from bench import cli as bench
from brain.testing import database_url
from knowledge.models import Fact, Memory


@pytest.mark.django_db(transaction=True)
def test_the_terminal_benchmark_times_commands_that_worked(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", database_url(connection.settings_dict))
    monkeypatch.setenv("BRAIN_EMBEDDER", "hash")
    monkeypatch.setattr(bench, "ROUNDS", 2)
    taught: list[int] = []
    delete = Memory.delete

    def counted_then_deleted(memory, *args, **kwargs):
        taught.append(
            Fact.objects.as_system("what the benchmark taught").filter(memory=memory).count()
        )
        return delete(memory, *args, **kwargs)

    monkeypatch.setattr(Memory, "delete", counted_then_deleted)

    section = bench.terminal_commands()

    assert section.startswith("## The terminal: `brain memory list` and `add`")
    for label in ("import django", "django.setup()", "brain memory list", "brain memory add"):
        assert f"| {label} |" in section
    assert "2 rounds in turn" in section
    assert taught == [3]  # the warm-up round's sentence and one a round
    assert not Memory.objects.filter(slug=bench.MEMORY).exists()
