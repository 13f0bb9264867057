"""Every page view parses what was posted through a form (``<app>/forms.py``), read from the
source (``ast``; nothing is imported): ``request.POST`` is only ever handed to a ``...Form``, never
read by hand (``request.POST["text"]``, ``.get``, ``.getlist``, ``in``). A form says in one place
what a post may carry, and a refusal is answered one way (``brain.htmx.refused``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("brain", "knowledge", "memory", "review", "agent", "surfaces")
SKIPPED_FOLDERS = {"tests", "migrations", "__pycache__"}


def view_modules() -> list[Path]:
    """The page views (``surfaces/views/``), and any ``views.py`` or ``*_views.py`` of an app
    or the platform."""
    found = sorted((ROOT / "surfaces" / "views").glob("*.py"))
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*views.py")):
            if not SKIPPED_FOLDERS & set(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def _a_form(call: ast.Call) -> bool:
    called = call.func
    name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
    return name.endswith("Form")


def posted_reads(source: str, where: str) -> list[str]:
    """Where ``source`` touches ``request.POST`` other than as an argument of a form."""
    tree = ast.parse(source, filename=where)
    handed_to_a_form = {
        id(argument)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and _a_form(call)
        for argument in call.args
    }
    return [
        f"{where}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "POST"
        and isinstance(node.value, ast.Name)
        and node.value.id == "request"
        and id(node) not in handed_to_a_form
    ]


def test_a_page_view_reads_what_was_posted_only_through_a_form():
    modules = view_modules()
    assert len(modules) >= 10, "the page views were not found where they are looked for"
    read_by_hand = [
        read
        for path in modules
        for read in posted_reads(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert read_by_hand == [], "Parse these through a form in <app>/forms.py:\n" + "\n".join(
        read_by_hand
    )


def test_the_walk_sees_a_read_by_hand_beside_a_form():
    view = (
        "def teach(request):\n"
        "    form = TextForm(request.POST)\n"
        '    return request.POST.get("text", "") + request.POST["text"]\n'
    )
    assert posted_reads(view, "views.py") == [
        "views.py:3: request.POST",
        "views.py:3: request.POST",
    ]
