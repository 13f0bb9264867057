"""Who may do what, one rule on every surface: pages, the API (signed in or with a token), MCP
and the terminal all ask ``knowledge.access`` and answer the same."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token

from brain.testing import database_url
from knowledge import access
from knowledge.models import Fact, Membership, Memory, Permission
from memory import revisions
from memory.models import Change, DocumentRevision, InboxItem
from memory.tests.test_mcp import Agent, drive

# Addresses that are not about one memory: signing in and out, health, the icon, the admin site
# (staff only, Django's own permissions), the API schema (signed-in only), and the house overview.
# The worker protocol answers a worker token only, never a person: its memory is the token's
# (brain/worker_api.py; brain/tests/test_worker_tokens.py walks every address with one).
NOT_ABOUT_A_MEMORY = {"login", "logout", "healthz", "favicon", "home", "api-schema"} | {
    "worker-next",
    "worker-heartbeat",
    "worker-answer",
}


@pytest.fixture
def granted(home, alice):
    """Give alice exactly ``permission`` in the default memory."""

    def grant(permission: Permission):
        Membership.objects.update_or_create(
            memory=home, user=alice, defaults={"permission": permission}
        )
        return alice

    return grant


def _counts(home: Memory) -> tuple[int, int, int, int]:
    return (
        Fact.objects.count(),
        InboxItem.objects.count(),
        DocumentRevision.objects.filter(memory=home).count(),
        Change.objects.count(),
    )


# The rule -------------------------------------------------------------------------------------


def test_the_system_superusers_grants_and_the_default_each_get_their_permission(
    home, alice, admin_user, settings, django_user_model
):
    assert access.permission_of(None, home) == Permission.ADMINISTER
    assert access.permission_of(admin_user, home) == Permission.ADMINISTER
    staff = django_user_model.objects.create_user(username="sam", is_staff=True)
    assert access.permission_of(staff, home) == Permission.TEACH  # the admin site is not a grant
    assert access.permission_of(alice, home) == Permission.TEACH  # nobody granted her anything

    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    assert access.permission_of(alice, home) == Permission.READ

    other = Memory.objects.create(slug="office", name="Office")
    settings.BRAIN_DEFAULT_PERMISSION = "none"
    assert access.permission_of(alice, other) == Permission.NONE

    alice.is_active = False
    assert access.permission_of(alice, home) == Permission.NONE


@pytest.mark.parametrize("value", ["administer", "everything"])
def test_a_default_of_administer_or_nonsense_is_refused_at_once(home, alice, settings, value):
    settings.BRAIN_DEFAULT_PERMISSION = value

    with pytest.raises(ImproperlyConfigured, match="BRAIN_DEFAULT_PERMISSION"):
        access.permission_of(alice, home)


def _patterns(resolver: URLResolver, prefix: str = ""):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.app_name == "admin":
                continue
            yield from _patterns(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def test_every_address_about_a_memory_declares_what_it_needs():
    undeclared = []
    for route, pattern in _patterns(get_resolver()):
        if pattern.name in NOT_ABOUT_A_MEMORY:
            continue
        view = getattr(pattern.callback, "cls", pattern.callback)  # DRF keeps the function's name
        if (view.__module__, view.__name__) not in access.DECLARED:
            undeclared.append(route)

    assert undeclared == []


# A person who may only read ------------------------------------------------------------------

READER_REFUSED_PAGES = [
    ("post", "/knowledge/teach", {"text": "The loft is warm."}),
    ("post", "/knowledge/document/save", {"text": "# Memory\n", "base_generation": "0"}),
    ("post", "/knowledge/file-now", {}),
    ("post", "/knowledge/changes/1/undo", {}),
    ("get", "/knowledge/document/edit", {}),
]
READER_REFUSED_API = [
    ("post", "/api/memory/add", {"fact": "The loft is warm."}),
    ("post", "/api/memory/inbox", {"text": "The loft is warm."}),
    ("put", "/api/memory/", {"text": "# Memory\n", "base_generation": 0}),
    ("post", "/api/memory/consolidate", {}),
    ("post", "/api/memory/changes/1/undo", {}),
    ("get", "/api/memory/export", {}),
]


@pytest.mark.parametrize(("method", "path", "data"), READER_REFUSED_PAGES)
def test_a_reader_is_refused_every_change_on_the_pages_and_nothing_is_written(
    client, home, granted, method, path, data
):
    client.force_login(granted(Permission.READ))
    before = _counts(home)

    response = getattr(client, method)(path, data)

    assert response.status_code == 403
    assert "you may read there" in response.content.decode()
    assert _counts(home) == before


@pytest.mark.parametrize(("method", "path", "data"), READER_REFUSED_API)
def test_a_reader_is_refused_every_change_on_the_api_and_nothing_is_written(
    client, home, granted, method, path, data
):
    client.force_login(granted(Permission.READ))
    before = _counts(home)

    response = getattr(client, method)(path, data, content_type="application/json")

    assert response.status_code == 403
    assert "you may read there" in response.json()["detail"]
    assert _counts(home) == before


def test_a_reader_still_reads_the_page_and_the_api_but_is_offered_no_teach_box(
    client, home, granted
):
    client.force_login(granted(Permission.READ))

    page = client.get("/knowledge/")
    api = client.get("/api/memory/")

    assert page.status_code == 200 and api.status_code == 200
    html = page.content.decode()
    assert 'id="teach-text"' not in html and "✎ Edit markdown" not in html
    assert "ask an administrator for permission to teach" in html


def test_a_refusal_to_an_htmx_request_is_a_toast_saying_why(client, home, granted):
    client.force_login(granted(Permission.READ))

    response = client.post(
        "/knowledge/teach", {"text": "The loft is warm."}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 403
    assert "permission to teach" in response["HX-Trigger"]


def test_a_person_without_access_cannot_even_read(client, home, granted):
    client.force_login(granted(Permission.NONE))

    assert client.get("/knowledge/").status_code == 403
    assert client.get("/api/facts/").status_code == 403
    assert client.post("/api/context", {}, content_type="application/json").status_code == 403


# A person who may teach ----------------------------------------------------------------------


def test_teaching_is_one_answer_on_the_teach_box_the_add_call_and_the_inbox(client, home, alice):
    client.force_login(alice)  # teach: the default nobody changed

    box = client.post("/knowledge/teach", {"text": "The loft is warm."})
    add = client.post(
        "/api/memory/add", {"fact": "The cellar is damp."}, content_type="application/json"
    )
    inbox = client.post(
        "/api/memory/inbox",
        {"text": "The porch light is on a timer."},
        content_type="application/json",
    )

    assert (box.status_code, add.status_code, inbox.status_code) == (302, 201, 201)
    assert InboxItem.objects.filter(taught_by=alice).count() == 3


def test_a_teacher_may_not_edit_undo_settle_or_export(client, home, alice):
    client.force_login(alice)
    change = revisions.save_user_edit(
        memory=home,
        text=DocumentRevision.objects.current(home).text + "- A line.\n",
        base_generation=0,
    )[0]

    refused = [
        client.put(
            "/api/memory/",
            {"text": "# Memory\n", "base_generation": 1},
            content_type="application/json",
        ),
        client.post(f"/api/memory/changes/{change.number}/undo"),
        client.get("/api/memory/export"),
        client.post(f"/knowledge/changes/{change.number}/undo"),
    ]

    assert [r.status_code for r in refused] == [403, 403, 403, 403]
    assert "permission to curate" in refused[0].json()["detail"]
    assert Change.objects.get(pk=change.pk).undone_by_id is None


def test_a_curator_may_edit_and_undo(client, home, granted):
    client.force_login(granted(Permission.CURATE))
    text = DocumentRevision.objects.current(home).text + "- The loft is warm.\n"

    saved = client.put(
        "/api/memory/", {"text": text, "base_generation": 0}, content_type="application/json"
    )
    number = Change.objects.latest("pk").number
    undone = client.post(f"/api/memory/changes/{number}/undo")

    assert (saved.status_code, undone.status_code) == (200, 200)


# Tokens carry their person's permissions -----------------------------------------------------


@pytest.mark.parametrize(
    ("permission", "status"), [(Permission.READ, 403), (Permission.TEACH, 201)]
)
def test_a_token_may_do_what_its_person_may(client, home, granted, permission, status):
    token = Token.objects.create(user=granted(permission))

    response = client.post(
        "/api/memory/add",
        {"fact": "The dog gets fed at 7 and 17."},
        content_type="application/json",
        headers={"Authorization": f"Token {token.key}"},
    )

    assert response.status_code == status


# The terminal and MCP ------------------------------------------------------------------------


def test_the_terminal_acts_as_a_named_person_with_their_permissions(home, granted):
    granted(Permission.READ)

    with pytest.raises(CommandError, match="permission to teach"):
        call_command("memory", "--as", "alice", "add", "The loft is warm.", stdout=io.StringIO())
    listed = io.StringIO()
    call_command("memory", "--as", "alice", "list", stdout=listed)

    assert "# " in listed.getvalue()
    assert not Fact.objects.exists()
    with pytest.raises(CommandError, match="no user called 'nobody'"):
        call_command("memory", "--as", "nobody", "list", stdout=io.StringIO())


def test_a_curator_at_the_terminal_may_not_import(home, granted, tmp_path):
    granted(Permission.CURATE)
    exported = tmp_path / "export.json"
    call_command("memory", "export", str(exported), stdout=io.StringIO())

    with pytest.raises(CommandError, match="permission to administer"):
        call_command("memory", "--as", "alice", "import", str(exported), stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_real_terminal_refuses_in_one_line(alice):
    Membership.objects.create(
        memory=Memory.objects.default(), user=alice, permission=Permission.READ
    )
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}

    done = subprocess.run(
        [sys.executable, "manage.py", "memory", "--as", "alice", "add", "The loft is warm."],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "permission to teach" in done.stderr
    assert not Fact.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_agent_serving_a_reader_may_search_but_not_write(alice):
    Membership.objects.create(
        memory=Memory.objects.default(), user=alice, permission=Permission.READ
    )

    async def scenario(agent: Agent, tools: dict) -> None:
        found = await agent.call("memory_search", query="loft")
        assert found["facts"] == []
        refused = await agent.refused("memory_write", content="The loft is warm.")
        assert "permission to teach" in refused

    drive(scenario, "--user", "alice")

    assert not Fact.objects.exists()
