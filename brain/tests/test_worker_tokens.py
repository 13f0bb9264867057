"""A worker token takes and answers its memory's model calls, and nothing else: every other
address brain serves refuses it (brain.middleware.WorkerTokenOnlyMiddleware). The MCP server
is not served over HTTP (stdio only), so it has no address to refuse."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import URLPattern, URLResolver, get_resolver

from brain import workers
from brain.middleware import WORKER_ONLY_MESSAGE
from brain.models import WorkerToken
from knowledge.models import Memory


def _every_address(resolver: URLResolver, prefix: str = ""):
    """Every URL pattern, the admin's included (the permission walker skips it)."""
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _every_address(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def _filled(route: str) -> str:
    path = "/" + route.lstrip("^").rstrip("$")
    for part in path.split("/"):
        if part.startswith("<") or "(?P<" in part:
            path = path.replace(part, "1")
    return path


ADDRESSES = sorted({_filled(route) for route in _every_address(get_resolver())})


@pytest.fixture
def key(home):
    return workers.create_token(memory=home, name="laptop").key


def test_the_walk_reaches_the_facts_the_document_the_export_and_the_admin():
    for needed in ("/api/facts/", "/api/memory/", "/api/memory/export", "/admin/", "/knowledge/"):
        assert needed in ADDRESSES


@pytest.mark.parametrize("scheme", ["Bearer", "Token"])
def test_a_worker_token_is_refused_by_every_address_but_the_worker_protocol(
    client, home, key, scheme
):
    opened = []
    for address in ADDRESSES:
        for method in ("get", "post", "put", "delete"):
            response = getattr(client, method)(
                address,
                content_type="application/json",
                headers={"Authorization": f"{scheme} {key}"},
            )
            if address.startswith("/api/worker/"):
                continue
            if response.status_code != 403 or response.json() != {"detail": WORKER_ONLY_MESSAGE}:
                opened.append((method, address, response.status_code))

    assert opened == []


def test_a_worker_token_beside_a_signed_in_session_is_still_refused(client, home, key, admin_user):
    client.force_login(admin_user)

    response = client.get("/api/memory/export", headers={"Authorization": f"Bearer {key}"})

    assert response.status_code == 403
    assert response.json() == {"detail": WORKER_ONLY_MESSAGE}


def test_the_same_person_without_the_worker_token_is_served(client, home, admin_user):
    client.force_login(admin_user)

    assert client.get("/api/memory/export").status_code == 200


# brain worker-token ----------------------------------------------------------------------------


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("worker-token", *args, stdout=out)
    return out.getvalue()


def test_the_terminal_makes_lists_and_revokes_tokens(home):
    Memory.objects.create(slug="office", name="Office")

    made = _run("create", "--memory", home.slug, "--name", "study laptop")
    _run("create", "--memory", "office", "--name", "desk")
    key = made.split()[-1]
    token = WorkerToken.objects.get(name="study laptop")

    assert key.startswith("bw_") and workers.token_for_key(key) == token
    listed = _run("list", "--memory", home.slug)
    assert "study laptop" in listed and token.prefix in listed and "desk" not in listed
    assert key not in listed
    assert "revoked" in _run("revoke", str(token.pk))
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert "already revoked" in _run("revoke", str(token.pk))
    assert "revoked" in _run("list")


def test_the_terminal_names_a_memory_or_token_that_does_not_exist(home):
    with pytest.raises(CommandError, match="No memory “nowhere”"):
        _run("create", "--memory", "nowhere", "--name", "x")
    with pytest.raises(CommandError, match="No worker token 999"):
        _run("revoke", "999")
    with pytest.raises(CommandError, match="name"):
        _run("create", "--memory", home.slug, "--name", "   ")
