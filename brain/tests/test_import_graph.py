"""How our modules may import each other, read from the source (``ast``; nothing is imported).

The rules:

- No cycles. No module imports one that imports it back, directly or through others. An import
  made inside a function counts like one at the top: hiding an import in a function is how a
  cycle survives unnoticed. A module that must start its own Celery task sends it by name
  (``brain.celery.send_on_commit``), so it never imports the tasks module that imports it.
- Layers: ``knowledge`` ← ``memory`` ← ``review`` ← ``agent`` ← ``surfaces``. A module of an app
  never imports a module of an app above it; a higher app's behaviour reaches a lower one through
  URL names in templates, or through ``surfaces``, the top layer, which assembles what a person
  or a program uses (the pages and their URLs, the API's URLs, navigation, the terminal, the MCP
  server, the export) from the apps below and may import any of them. No app imports
  ``surfaces``: it is reached by name only (``include("surfaces.urls")`` in brain/urls.py, its
  management commands, the context processor in settings), and by the benchmarks.
- ``brain`` is the platform: it imports no app. Apps are wired into it by name (``include(
  "surfaces.urls")``, the context processors and middleware in settings), never by import.
- The top-level ``bench`` package measures everything: it may import any module, and none
  imports it.
- A worker's answer is checked against a class found among the modules already loaded, so
  ``surfaces/worker_urls.py`` imports every module whose model calls name an answer class.
- Nothing is imported by a name held in data (``import_string``, ``import_module``): a module
  that needs another imports it, so every edge is in this graph and a layer is held by it.

Read: every ``.py`` file of those packages but their ``tests`` and ``migrations`` folders (tests
drive the whole stack on purpose; migrations are generated).
"""

from __future__ import annotations

import ast
import importlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from brain.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
APPS = ("knowledge", "memory", "review", "agent", "surfaces")  # lowest first
PACKAGES = ("brain", *APPS, "bench")
SKIPPED_FOLDERS = {"tests", "migrations", "__pycache__"}


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name (a package by its own)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if SKIPPED_FOLDERS & set(parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _ours(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours that importing ``name`` runs: itself, or the nearest package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module → the modules of ours it imports, anywhere in its body."""
    known = modules(root, packages)
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(_ours(alias.name, known) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ..y import z
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:  # "from memory import actions" imports memory.actions
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in known else _ours(base, known))
        targets.discard(None)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module that is on one, each cycle reported once."""
    seen: set[frozenset[str]] = set()
    found = []
    for start in sorted(graph):
        path = _shortest_path_back(graph, start)
        if path and frozenset(path) not in seen:
            seen.add(frozenset(path))
            found.append(path)
    return found


def _shortest_path_back(graph: dict[str, set[str]], start: str) -> list[str] | None:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for target in sorted(graph.get(module, ())):
            if target == start:
                path = [module]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in came_from:
                came_from[target] = module
                queue.append(target)
    return None


def _top(module: str) -> str:
    return module.split(".")[0]


def _calls_of(path: Path, function: str) -> Iterator[ast.Call]:
    """Every call of a function named ``function`` in the module at ``path``: ``function(...)``
    and ``x.function(...)``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        called = getattr(node, "func", None)
        name = getattr(called, "id", getattr(called, "attr", ""))
        if isinstance(node, ast.Call) and name == function:
            yield node


def _package(root: Path, **files: str) -> None:
    """A package ``shop`` under ``root`` holding ``files`` (module name → source)."""
    package = root / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, source in files.items():
        (package / f"{module}.py").write_text(source)


GRAPH = imports(ROOT, PACKAGES)


def test_no_module_imports_one_that_imports_it_back():
    found = [" → ".join(cycle) for cycle in cycles(GRAPH)]

    assert found == []


def test_a_lower_app_never_imports_a_higher_one():
    rank = {app: level for level, app in enumerate(APPS)}
    upward = [
        f"{module} → {target}"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if _top(module) in rank and _top(target) in rank and rank[_top(target)] > rank[_top(module)]
    ]

    assert upward == []


def test_the_platform_imports_no_app():
    reaching = [
        f"{module} → {target}"
        for module, targets in sorted(GRAPH.items())
        if _top(module) == "brain"
        for target in sorted(targets)
        if _top(target) in APPS
    ]

    assert reaching == []


def test_nothing_but_the_benchmarks_imports_the_benchmarks():
    reaching = [
        f"{module} → {target}"
        for module, targets in sorted(GRAPH.items())
        if _top(module) != "bench"
        for target in sorted(targets)
        if _top(target) == "bench"
    ]

    assert reaching == []


def test_the_graph_sees_a_cycle_hidden_in_a_function_and_a_relative_import(tmp_path):
    _package(
        tmp_path,
        orders="from . import stock\n\ndef cancel():\n    from shop.tasks import refund\n",
        stock="import os\n",
        tasks="from shop import orders\n",
    )

    graph = imports(tmp_path, ("shop",))

    assert graph["shop.orders"] == {"shop.stock", "shop.tasks"}
    assert cycles(graph) == [["shop.orders", "shop.tasks", "shop.orders"]]


# Imports by a name held in data ---------------------------------------------------------------

IMPORTS_BY_NAME = {"import_string", "import_module"}


def imports_by_name(root: Path, packages: tuple[str, ...]) -> list[str]:
    """Every use of ``import_string`` or ``import_module`` (imported, called or referred to)."""
    found = []
    for name, path in modules(root, packages).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                used = [alias.name for alias in node.names]
            elif isinstance(node, ast.Name):
                used = [node.id]
            elif isinstance(node, ast.Attribute):
                used = [node.attr]
            else:
                continue
            found += [f"{name}:{node.lineno} {u}" for u in used if u in IMPORTS_BY_NAME]
    return sorted(set(found))


def test_no_module_imports_another_by_a_name_held_in_data():
    assert imports_by_name(ROOT, PACKAGES) == []


def test_an_import_by_name_is_seen_however_it_is_written(tmp_path):
    _package(
        tmp_path,
        plugins="import importlib\nfrom django.utils.module_loading import import_string\n\n"
        "def load(path):\n    return importlib.import_module(path)\n",
    )

    assert imports_by_name(tmp_path, ("shop",)) == [
        "shop.plugins:2 import_string",
        "shop.plugins:5 import_module",
    ]


# Tasks sent by name --------------------------------------------------------------------------


def _tasks_sent_by_name() -> list[str]:
    names = []
    for path in modules(ROOT, PACKAGES).values():
        for call in _calls_of(path, "send_on_commit"):
            if call.args and isinstance(call.args[0], ast.Constant):
                names.append(call.args[0].value)
    return sorted(set(names))


def test_every_task_sent_by_name_is_one_the_worker_runs():
    names = _tasks_sent_by_name()

    # The consolidator, Deep review and the timeline each start their own task.
    assert {
        "memory.tasks.consolidate",
        "review.tasks.deep_review",
        "review.tasks.push_event",
    } <= set(names)
    for name in names:
        importlib.import_module(name.rpartition(".")[0])  # as the worker's autodiscovery does
    assert [name for name in names if name not in celery_app.tasks] == []


# The modules a worker's answer is checked against -------------------------------------------


def asking_for_an_answer_class(root: Path, packages: tuple[str, ...]) -> list[str]:
    """Every module with a model call that names the class its answer must be: a model task
    (``llm.Task``) or a call of ``complete`` (``llm.complete``) given ``output=`` a class by
    its name (a task's call passes its own on: ``output=self.output`` names none)."""
    return [
        name
        for name, path in modules(root, packages).items()
        if any(
            keyword.arg == "output" and isinstance(keyword.value, ast.Name)
            for function in ("Task", "complete")
            for call in _calls_of(path, function)
            for keyword in call.keywords
        )
    ]


def test_the_worker_urls_load_every_module_whose_model_calls_name_an_answer_class():
    # A worker's answer is checked against a class looked up among the modules already loaded
    # (brain.workers), so the process taking the answer must have loaded each of them.
    asking = asking_for_an_answer_class(ROOT, ("brain", *APPS))
    assert len(asking) >= 10, "the model calls were not found where they are looked for"

    assert [name for name in asking if name not in GRAPH["surfaces.worker_urls"]] == []


def test_the_walk_sees_a_model_call_that_names_an_answer_class(tmp_path):
    _package(
        tmp_path,
        pricing="from brain import llm\n\n"
        "def price():\n    return llm.complete(task='price', output=Price)\n",
        summary="from brain import llm\n\ndef say():\n    return llm.complete(task='say')\n",
        quoting="from brain import llm\n\nQUOTE = llm.Task('quote', 'Quote.', output=Quote)\n",
        passing_on="from brain import llm\n\n"
        "def ask(task):\n    return llm.complete(task=task.name, output=task.output)\n",
    )

    assert sorted(asking_for_an_answer_class(tmp_path, ("shop",))) == [
        "shop.pricing",
        "shop.quoting",
    ]
