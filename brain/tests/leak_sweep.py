"""What the leak sweeps share (``test_leak_sweep_*.py``): the canaries, the ids to ask for, a
walk of every URL the resolver knows as one person.

Nobody reads what they may not, on any surface: a generated sweep.

``privacy_world`` builds memories where some people may not read some texts, each such text
carrying a canary word. Every URL the resolver knows is requested as each person (pages and
their htmx partials, the API, the admin, exports), with every id of the world in its path and
every memory in its address; every MCP tool and every read verb of the CLI is called as each
person; and what is pushed to a loopback Home Assistant is read. No answer (body, headers) may
hold a canary its reader may not read. A URL added later is walked without editing this file.
"""

from __future__ import annotations

import json
from collections import defaultdict

from django.apps import apps
from django.test import Client

from brain.tests import endpoints, privacy_world

# What a person would ask to find the canaries, in words of the texts that carry them (never
# a canary itself: an answer may repeat the question).
QUESTIONS = privacy_world.QUESTION
POST_BODIES = {
    "knowledge-api:context": {"question": QUESTIONS, "token_budget": 2000},
    "learning-api:ask": {"question": QUESTIONS},
    "agent-api:retrieve": {"query": QUESTIONS, "k": 20},
    "memory:ask": {"question": QUESTIONS},
}


def leaks(world, person: str, text: str) -> set[str]:
    low = text.casefold()
    return {canary for canary in world.forbidden(person) if canary in low}


def answer_text(response) -> str:
    body = b"".join(response) if getattr(response, "streaming", False) else response.content
    headers = "\n".join(f"{k}: {v}" for k, v in response.items())
    return headers + "\n" + body.decode("utf-8", "replace")


def rows_with_canaries() -> dict:
    """Every row of the apps' models whose own fields hold a canary, by model."""
    found: dict = defaultdict(set)
    for model in models():
        fields = [f.attname for f in model._meta.concrete_fields]
        for row in model._base_manager.values("pk", *fields):
            text = json.dumps(row, default=str).casefold()
            if any(canary in text for canary in privacy_world.CANARIES):
                found[model].add(row["pk"])
    return found


def models():
    return [
        model
        for model in apps.get_models()
        if model._meta.app_label in ("brain", "knowledge", "memory", "review", "agent")
    ]


def asked_ids() -> list[int]:
    """The ids a path's ``<int:pk>`` is tried with: every row that holds a canary, and the pages
    of facts that do (a page's own row holds none) — each number tried on every path, so rows of
    other kinds, other memories and rows a person may not read are all asked for."""
    from knowledge.models import Subject

    rows = rows_with_canaries()
    ids = {pk for pks in rows.values() for pk in pks}
    facts = next((pks for model, pks in rows.items() if model.__name__ == "Fact"), set())
    pages = Subject.objects.as_system("the sweep's pages").filter(facts__in=facts)
    ids.update(pages.values_list("pk", flat=True))
    return sorted(ids)


def memories_of(pk: int, world, *, across: bool) -> set[str]:
    """The slugs of the memories whose rows have id ``pk`` (of any model) — or with ``across``
    only ``other``: an id asked for across memories, where reading there could open another's
    (Read as chosen in ``other``; in its own memory the person reads as themselves, which the
    walk as that person covers)."""
    if across:
        return {world.other.slug}
    slugs: set[str] = set()
    for model in models():
        if any(f.name == "memory" for f in model._meta.concrete_fields):
            rows = model._base_manager.filter(pk=pk).values_list("memory__slug", flat=True)
            slugs.update(rows)
    return slugs


def walk(world, person: str, client: Client, found: dict, *, across=False, with_ids=True) -> int:
    """Every URL as ``person``; ``with_ids``, the paths that name a row too, with each of
    ``asked_ids`` in its own memory (``across``: in ``other`` instead)."""
    requests = 0
    ids = asked_ids() if with_ids else []
    every = [world.team.slug, world.home.slug, world.other.slug]
    asked_in = {pk: memories_of(pk, world, across=across) for pk in ids}
    for route in endpoints.routes():
        if route.name in ("logout", "login"):
            continue
        fills = [{}] if not route.params else [dict.fromkeys(route.params, pk) for pk in ids]
        if not fills:
            continue
        gets = "get" in route.methods
        for values in fills:
            path = route.url(**values)
            slugs = every if not values else sorted(asked_in[next(iter(values.values()))])
            for slug in slugs:
                # A partial of an object's view answers as its page does: its htmx form is
                # asked for on the paths without an id.
                for htmx in (False, True) if not values else (False,):
                    headers = {"HX-Request": "true"} if htmx else {}
                    if gets:
                        response = client.get(path, {"memory": slug}, headers=headers)
                        requests += 1
                        if response.status_code == 405:  # a view that only takes a POST
                            gets = False
                        for canary in leaks(world, person, answer_text(response)):
                            found[(person, canary)].append(f"GET {path}?memory={slug} htmx={htmx}")
                    body = POST_BODIES.get(route.name)
                    if body is not None and not htmx:
                        url = f"{path}?memory={slug}"
                        if route.api:
                            response = client.post(url, body, content_type="application/json")
                        else:
                            response = client.post(url, body)
                        requests += 1
                        for canary in leaks(world, person, answer_text(response)):
                            found[(person, canary)].append(f"POST {url}")
    return requests


def described(found: dict) -> str:
    return "\n".join(
        f"{who} read {canary} at {len(where)} places, e.g. {where[:5]}"
        for (who, canary), where in found.items()
    )
