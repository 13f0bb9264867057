"""Benchmarks of the memory document (one of `make bench`'s BENCHMARKS)."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from datetime import timedelta

from django.utils import timezone

from knowledge.read_layer import SYSTEM
from memory import actions as memory_actions
from memory.composers.base import Candidate, Request
from memory.composers.offline import OfflineComposer
from memory.demo import household_document, household_facts
from memory.taught import Statement

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
    request = Request(document=text, candidates=candidates, max_bytes=DOCUMENT_BYTES)

    def file_twenty():
        return composer.compose(request)

    def pass_through():
        return composer.compose(replace(request, candidates=[]))

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


TAB_ROUNDS = 15
TAB_FACTS = 100_000


def _served(client, url: str, headers: dict | None = None) -> tuple[float, int]:
    """Median server time of ``url`` over TAB_ROUNDS requests, and its SQL query count."""
    from django.db import connection

    client.get(url, headers=headers)  # warm caches, as a person's second visit would
    queries = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        response = client.get(url, headers=headers)
    assert response.status_code == 200, (url, response.status_code)
    return _median_ms(lambda: client.get(url, headers=headers), TAB_ROUNDS), len(queries)


TAB_QUEUE = 60  # statements waiting to be filed: more than the tab lists (WAITING_SHOWN)


def _queue(*memories) -> list:
    """TAB_QUEUE new statements taught into each of ``memories``; their inbox items."""
    from bench import knowledge as knowledge_bench

    items = []
    for memory in memories:
        for text in knowledge_bench.new_statements(TAB_QUEUE, seed=3):
            learned = memory_actions.learn(
                Statement.typed(memory=memory, text=text, origin="typed")
            )
            items += [learned.item] if learned.item is not None else []
    return items


def knowledge_tab_at_scale() -> str:
    """The Knowledge tab and a filtered facts request with 100k facts, against the same
    requests on an empty memory measured in the same run."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from bench import knowledge as knowledge_bench
    from knowledge.models import Memory

    user, _ = get_user_model().objects.get_or_create(username="bench", is_staff=True)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    empty, _ = Memory.objects.get_or_create(
        slug="bench-tab-empty", defaults={"name": "Empty", "learning": False}
    )
    household = knowledge_bench.shared_household(TAB_FACTS).memory
    slug = household.slug
    htmx = {"HX-Request": "true"}
    try:
        rows = []
        for label, path, headers in (
            ("the tab, first paint", "/knowledge/?memory={}", None),
            (
                "facts: search “kitchen”, Rooms chip",
                "/knowledge/facts?memory={}&q=kitchen&chip=room",
                htmx,
            ),
            ("facts: most certain first", "/knowledge/facts?memory={}&sort=certain", htmx),
            ("facts: Show more (page 3)", "/knowledge/facts?memory={}&page=3", htmx),
        ):
            big, big_queries = _served(client, path.format(slug), headers)
            small, _ = _served(client, path.format(empty.slug), headers)
            rows.append(
                f"| {label} | {big:.1f} ms | {small:.1f} ms | {big / small:.1f}× | {big_queries} |"
            )
        # The same first paint with a queue in each memory, dropped after (intake, next, finds
        # the household as it was).
        taught = _queue(household, empty)
        try:
            path = "/knowledge/?memory={}"
            big, big_queries = _served(client, path.format(slug))
            small, _ = _served(client, path.format(empty.slug))
            rows.append(
                f"| the tab, first paint, {TAB_QUEUE} statements waiting | {big:.1f} ms | "
                f"{small:.1f} ms | {big / small:.1f}× | {big_queries} |"
            )
        finally:
            for item in taught:
                memory_actions.drop_inbox_item(item=item)
    finally:
        empty.delete()
    return (
        "## The Knowledge tab at 100k facts\n\n"
        f"Server time (Django test client, median of {TAB_ROUNDS} after one warm-up) of the tab "
        f"and of filtered facts requests on a memory holding {TAB_FACTS:,} live facts (the "
        "synthetic household of the recall benchmark), against the same request on an empty "
        f"memory in the same run; last, the first paint with {TAB_QUEUE} new statements "
        "waiting to be filed in each memory (the queue lists the next 50 and counts the "
        "rest).\n\n"
        "| request | 100k facts | empty memory | ratio | SQL queries |\n|---|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n"
    )


IMPORT_FACTS = 10_000


def import_rate() -> str:
    """`brain memory import` of a household's export (IMPORT_FACTS facts with their subjects and
    sources) into an empty memory, against plain ``bulk_create`` of the same fact rows into
    another, in the same run."""
    from bench import knowledge as knowledge_bench
    from knowledge.models import Fact, Memory
    from surfaces import portable

    slugs = ("bench-import-from", "bench-import", "bench-import-plain")
    for slug in slugs:
        knowledge_bench.delete_household(slug)
    try:
        household = knowledge_bench.generate_household(slug=slugs[0], count=IMPORT_FACTS)
        raw = portable.export_json(household.memory, reader=SYSTEM)
        into = Memory.objects.create(slug=slugs[1], name="Imported", learning=False)
        plain = Memory.objects.create(slug=slugs[2], name="Plain", learning=False)
        started = time.perf_counter()
        portable.import_memory(into, portable.parse(raw))
        imported = time.perf_counter() - started
        count = (
            Fact.objects.as_system("the benchmark checks what it imported").for_memory(into).count()
        )
        rows = [
            Fact(memory=plain, **values)
            for values in Fact.objects.as_system("the benchmark checks what it imported")
            .for_memory(household.memory)
            .values("text", "normalized", "kind", "channel", "confidence", "prior", "status")
        ]
        started = time.perf_counter()
        Fact.objects.bulk_create(rows, batch_size=1000)
        baseline = time.perf_counter() - started
    finally:
        for slug in slugs:
            knowledge_bench.delete_household(slug)
    rate, plain_rate = count / imported, len(rows) / baseline
    return (
        "## Import\n\n"
        f"`brain memory import` of a household's export ({count:,} facts, their subjects and "
        "sources) into an empty memory: every entry checked, subjects and sources resolved, "
        "facts, links and successors written in one transaction. Vectors are not computed "
        "during the import but after it, in the background (`knowledge/portable.py`). "
        "Baseline: plain `bulk_create` of the same fact rows into another memory.\n\n"
        "| path | facts/s | ratio to baseline |\n|---|---:|---:|\n"
        f"| import | {rate:,.0f} | {plain_rate / rate:.1f}× slower |\n"
        f"| plain bulk_create | {plain_rate:,.0f} | 1.0× |\n\n"
        f"Target: at least 1,000 facts/s: {'met' if rate >= 1000 else '**not met**'}.\n"
    )


BULK_STATEMENTS = 5_000


def bulk_adds() -> str:
    """``POST /api/memory/add/bulk`` of BULK_STATEMENTS statements into a memory of
    IMPORT_FACTS facts (the recall benchmark's household), against plain ``bulk_create`` of as
    many rows in the same run."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from bench import knowledge as knowledge_bench
    from knowledge.models import Fact

    slug = "bench-bulk"
    knowledge_bench.delete_household(slug)
    try:
        household = knowledge_bench.generate_household(slug=slug, count=IMPORT_FACTS)
        user, _ = get_user_model().objects.update_or_create(
            username="bench", defaults={"is_superuser": True, "is_staff": True}
        )
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)
        texts = knowledge_bench.new_statements(2 * BULK_STATEMENTS, seed=13)
        started = time.perf_counter()
        response = client.post(
            f"/api/memory/add/bulk?memory={slug}",
            {"facts": texts[:BULK_STATEMENTS]},
            content_type="application/json",
        )
        seconds = time.perf_counter() - started
        assert response.status_code == 201, response.content
        added = response.json()["added"]
        rows = [
            Fact(memory=household.memory, text=text, normalized=text.lower(), channel="api")
            for text in texts[BULK_STATEMENTS:]
        ]
        started = time.perf_counter()
        Fact.objects.bulk_create(rows, batch_size=1000)
        baseline = time.perf_counter() - started
    finally:
        knowledge_bench.delete_household(slug)
    rate, plain_rate = BULK_STATEMENTS / seconds, len(rows) / baseline
    return (
        "## Bulk adds through the API\n\n"
        f"One `POST /api/memory/add/bulk` of {BULK_STATEMENTS:,} new household statements "
        f"({added:,} added, the rest already known) into a memory of {IMPORT_FACTS:,} facts: "
        "cleaned, checked for secrets, compared by their words with every live fact, their "
        "subjects found, written through the import in one transaction (vectors after it, in "
        "the background). Baseline: plain `bulk_create` of as many rows.\n\n"
        "| path | statements/s | ratio to baseline |\n|---|---:|---:|\n"
        f"| bulk add | {rate:,.0f} | {plain_rate / rate:.1f}× slower |\n"
        f"| plain bulk_create | {plain_rate:,.0f} | 1.0× |\n\n"
        f"Target: at least 1,000 statements/s: {'met' if rate >= 1000 else '**not met**'}.\n"
    )
