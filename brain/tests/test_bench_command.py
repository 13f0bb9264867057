"""`make bench`: every benchmark's section is kept, one that fails says why, and what the
benchmarks shared is cleaned up whatever happened."""

import io
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from bench.management.commands import bench

cleaned: list[str] = []


def measures_fine() -> str:
    return "## Fine\n\nIt measured 3 ms.\n"


def carries_over() -> str:
    """As recall does with the 1M section: what the file held before the run began."""
    before = Path(os.environ["BRAIN_BENCH_PREVIOUS"]).read_text()
    return "## Carried\n\n" + before.split("## Kept", 1)[1].split("\n## ", 1)[0]


def breaks() -> str:
    raise RuntimeError("the household could not be loaded")


def clean_up() -> None:
    cleaned.append("shared households")


def test_a_failing_benchmark_keeps_the_others_sections_and_the_cleanup_still_runs(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(bench, "BENCHMARKS", [breaks, measures_fine])
    monkeypatch.setattr(bench, "CLEANUPS", [clean_up])
    output = tmp_path / "BENCHMARKS.md"
    cleaned.clear()

    with pytest.raises(CommandError, match="breaks"):
        call_command("bench", output=str(output), stdout=io.StringIO())

    written = output.read_text()
    assert "Failed in this run: the household could not be loaded" in written
    assert "It measured 3 ms." in written
    assert cleaned == ["shared households"]


def test_a_section_of_an_earlier_run_can_be_carried_over_though_the_file_is_rewritten(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(bench, "BENCHMARKS", [measures_fine, carries_over])
    monkeypatch.setattr(bench, "CLEANUPS", [])
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Kept\n\n1M: measured on its own, 50 min.\n")

    call_command("bench", output=str(output), stdout=io.StringIO())

    written = output.read_text()
    assert "It measured 3 ms." in written
    assert "1M: measured on its own, 50 min." in written


def measures_again() -> str:
    return "## Fine\n\nIt measured 2 ms.\n\n## New\n\nA first figure.\n"


def test_only_some_benchmarks_replace_their_own_sections_and_keep_every_other(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(bench, "BENCHMARKS", [breaks, measures_again])
    output = tmp_path / "BENCHMARKS.md"
    output.write_text(
        "# Benchmarks\n\n## Before\n\nKept.\n\n## Fine\n\nIt measured 3 ms.\n\n"
        f"## After\n\nKept too.\n\n## {__name__}.measures_again\n\nFailed in this run: no.\n"
    )

    call_command("bench", output=str(output), only=["measures"], stdout=io.StringIO())

    written = output.read_text()
    assert "It measured 2 ms." in written and "3 ms" not in written
    assert written.index("## Before") < written.index("## Fine") < written.index("## After")
    assert written.index("## After") < written.index("## New")
    assert "Kept." in written and "Kept too." in written and "A first figure." in written
    assert written.count("on its own, with `make bench ONLY=") == 2
    assert "could not be loaded" not in written
    assert "Failed in this run" not in written  # the last run's failure, measured since


def test_only_a_word_no_benchmark_holds_is_refused_naming_them(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "BENCHMARKS", [measures_fine])

    with pytest.raises(CommandError, match="measures_fine"):
        call_command("bench", output=str(tmp_path / "B.md"), only=["gait"], stdout=io.StringIO())


def carries_kept_over() -> str:
    return "## Again\n\nMeasured now.\n\n## Kept\n\n1M: measured on its own, 50 min.\n"


def test_only_a_section_carried_over_whole_keeps_its_own_date(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "BENCHMARKS", [carries_kept_over])
    output = tmp_path / "BENCHMARKS.md"
    output.write_text(
        "# Benchmarks\n\n## Again\n\nOld.\n\n## Kept\n\n1M: measured on its own, 50 min.\n"
    )

    call_command("bench", output=str(output), only=["carries"], stdout=io.StringIO())

    written = output.read_text()
    assert written.count("on its own, with `make bench ONLY=") == 1
    assert "Measured now." in written and "Old." not in written
