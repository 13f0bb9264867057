"""Benchmarks of the memory document (registered in settings.BRAIN_BENCHMARKS)."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from django.utils import timezone

from memory.composers.base import Candidate
from memory.composers.offline import OfflineComposer
from memory.demo import household_document, household_facts

DOCUMENT_BYTES = 32 * 1024
ITEMS = 20
ROUNDS = 15


def _median_ms(work, rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def offline_composer() -> str:
    """Filing 20 items into a 32 KB document with the offline composer."""
    text = household_document(DOCUMENT_BYTES)
    now = timezone.now()
    candidates = [
        Candidate(
            id=n,
            text=fact,
            origin="typed",
            confidence="medium",
            created_at=now + timedelta(seconds=n),
        )
        for n, fact in enumerate(household_facts(ITEMS, seed=7))
    ]
    composer = OfflineComposer()

    def file_twenty():
        return composer.compose(document=text, candidates=candidates, max_bytes=DOCUMENT_BYTES)

    def pass_through():
        return composer.compose(document=text, candidates=[], max_bytes=DOCUMENT_BYTES)

    filing = _median_ms(file_twenty)
    baseline = _median_ms(pass_through)
    result = file_twenty()
    lines = len([line for line in text.splitlines() if line.startswith("- ")])
    return (
        "## Offline composer: filing 20 items into a 32 KB document\n\n"
        f"Document: {len(text.encode()):,} bytes, {lines} facts; {ITEMS} new items; median of "
        f"{ROUNDS} rounds. Baseline: the same composer with nothing to file (parse, render, "
        "voice distillate).\n\n"
        "| measure | median | ratio to baseline |\n|---|---:|---:|\n"
        f"| file 20 items | {filing:.1f} ms | {filing / baseline:.1f}× |\n"
        f"| baseline (nothing to file) | {baseline:.1f} ms | 1.0× |\n\n"
        f"Result: {len(result.document.encode()):,} bytes after the cap, "
        f"{len(result.notes)} decisions noted. A pass's deadline is 480 s, so this is "
        f"{filing / 1000 / 480:.5%} of it.\n"
    )
