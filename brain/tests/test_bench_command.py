"""`make bench`: every benchmark's section is kept, one that fails says why, and what the
benchmarks shared is cleaned up whatever happened."""

import io

import pytest
from django.core.management import CommandError, call_command

cleaned: list[str] = []


def measures_fine() -> str:
    return "## Fine\n\nIt measured 3 ms.\n"


def breaks() -> str:
    raise RuntimeError("the household could not be loaded")


def clean_up() -> None:
    cleaned.append("shared households")


def test_a_failing_benchmark_keeps_the_others_sections_and_the_cleanup_still_runs(
    settings, tmp_path
):
    settings.BRAIN_BENCHMARKS = [f"{__name__}.breaks", f"{__name__}.measures_fine"]
    settings.BRAIN_BENCHMARK_CLEANUPS = [f"{__name__}.clean_up"]
    output = tmp_path / "BENCHMARKS.md"
    cleaned.clear()

    with pytest.raises(CommandError, match="breaks"):
        call_command("bench", output=str(output), stdout=io.StringIO())

    written = output.read_text()
    assert "Failed in this run: the household could not be loaded" in written
    assert "It measured 3 ms." in written
    assert cleaned == ["shared households"]
