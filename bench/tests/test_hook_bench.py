"""The SessionStart hook benchmark measures a hook that prints the block, not one that stays
silent (a benchmark of silence would look fast)."""

import pytest

from bench import agent as bench
from bench import brainmem, knowledge
from knowledge.models import Memory


@pytest.mark.django_db(transaction=True)
def test_the_hook_benchmark_times_hooks_that_print_the_block(monkeypatch):
    monkeypatch.setattr(bench, "FACTS", 500)
    monkeypatch.setattr(bench, "ROUNDS", 4)
    monkeypatch.setattr(brainmem, "brainmem_cli", lambda: (None, "not installed for this test"))
    monkeypatch.setattr(knowledge, "_SHARED", {})

    try:
        section = bench.session_start_hook()

        assert section.startswith("## The SessionStart hook at 500 live facts, against brainmem")
        assert "| brain SessionStart hook → server |" in section
        assert "| 4 of 4 |" in section
        assert (
            "brainmem was not measured: not installed for this test. Ours is reported alone."
            in section
        )
        # It reads the run's shared household and leaves it to the benchmarks after it.
        assert list(knowledge._SHARED) == [500]
        assert Memory.objects.filter(pk=knowledge._SHARED[500].memory.pk).exists()
    finally:
        knowledge.release_shared()
    assert not Memory.objects.filter(slug__startswith="bench-").exists()
