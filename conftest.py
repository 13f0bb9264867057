"""Fixtures every app's tests share: users, a real Celery worker, and headless Chromium."""

from __future__ import annotations

import os

import pytest

from brain import embedded, testing

# Playwright's sync API runs an event loop in the test thread; Django's ORM calls made from
# that thread are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

_started_here: list = []


def pytest_configure(config: pytest.Config) -> None:
    """The embedded servers are started before anything else, by the run (or, with several
    workers, ``pytest -n``, by the process that starts them: a worker that started a server
    would stop it under the others when it ended). Each worker gets a broker database of its own
    (``testing.worker``), as it gets a test database of its own from pytest-django."""
    testing.set_worker(getattr(config, "workerinput", {}).get("workerid", ""))
    if not testing.worker():
        if embedded.uses_embedded_database() and embedded.postgres.ensure_running():
            _started_here.append(embedded.postgres)
        if testing.test_valkey.ensure_running():
            _started_here.append(testing.test_valkey)
    testing.use_test_broker()
    # Every ModelAdmin registered, as a web process has them once its URLs load (brain/apps.py):
    # a test that walks the admin's registry need not load the URLs first.
    from brain.apps import discover_admin

    discover_admin()


def pytest_sessionstart(session: pytest.Session) -> None:
    _create_a_dirty_test_database_afresh(session.config)


def _create_a_dirty_test_database_afresh(config: pytest.Config) -> None:
    """A reused test database that an interrupted run left rows in is created afresh, as
    --create-db would (brain.testing.left_dirty)."""
    from django.conf import settings

    if config.getoption("create_db", False) or not config.getoption("reuse_db", False):
        return
    if getattr(config, "workerinput", None) is None and config.getoption("numprocesses", None):
        return  # the controller of ``pytest -n``: each worker checks the database it uses
    name = testing.test_database_name(settings.DATABASES["default"])
    try:
        why = testing.left_dirty(settings.DATABASES["default"], name)
    except testing.DatabaseInUse as busy:
        raise pytest.UsageError(str(busy)) from None
    if why:
        print(f"brain: the test database {name} was left dirty ({why}); creating it afresh.")
        config.option.create_db = True


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, then the mark that a run is using the test database."""
    from django.conf import settings

    testing.mark_in_use(settings.DATABASES["default"]["TEST"]["NAME"])
    yield


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop only what this run started: a `make run` going at the same time keeps its servers.
    A run that ended whole clears its mark on the test database (an interrupted one leaves it,
    so the next creates the database afresh)."""
    from django.conf import settings
    from django.db import connections

    connections.close_all()
    if exitstatus != pytest.ExitCode.INTERRUPTED:
        testing.mark_finished(settings.DATABASES["default"]["TEST"]["NAME"])
    for server in reversed(_started_here):
        server.stop()


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """Passwords are hashed with MD5 under test: PBKDF2's million rounds on every test user would
    be a large share of the suite's time. Tests only; production keeps Django's default hashers
    (checked by brain/tests/test_deploy_check.py), which still verify any hash made elsewhere."""
    from django.conf import settings
    from django.test.utils import override_settings

    fast = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=fast):
        yield


@pytest.fixture(autouse=True)
def _hash_embedder(settings):
    """Tests embed with the deterministic hash embedder; MiniLM has tests of its own."""
    settings.BRAIN_EMBEDDER = "hash"


@pytest.fixture
def llm_stub(settings):
    """The real Anthropic SDK pointed at a stand-in Messages API on loopback
    (brain/tests/stubs/messages.py)."""
    from brain.tests.stubs.messages import MessagesStub

    with MessagesStub() as server:
        server.configure(settings)
        yield server


@pytest.fixture
def ollama_stub():
    """A local model with Ollama's API on loopback, for brain/worker/
    (brain/tests/stubs/local_model.py)."""
    from brain.tests.stubs.local_model import OllamaStub

    with OllamaStub() as server:
        yield server


@pytest.fixture
def openai_stub():
    """A local model with the OpenAI-compatible API on loopback
    (brain/tests/stubs/local_model.py)."""
    from brain.tests.stubs.local_model import OpenAIStub

    with OpenAIStub() as server:
        yield server


PASSWORD = "correct horse battery staple"


@pytest.fixture
def password() -> str:
    return PASSWORD


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser(username="ada", password=PASSWORD)


@pytest.fixture
def home(db):
    """The default memory ("home"), made on first use as every surface would."""
    from knowledge.models import Memory

    return Memory.objects.default()


@pytest.fixture
def signed_in(client, admin_user, home):
    """The test client signed in as the administrator, the default memory in place."""
    client.force_login(admin_user)
    return client


@pytest.fixture
def raised_finding(home):
    """An open high-stakes finding in the default memory, raised as a house check raises it."""
    from review import findings

    return findings.raise_finding(
        memory=home, check_id="leak", text="Water under the kitchen sink.", severity="high"
    ).finding


@pytest.fixture
def races(monkeypatch):
    """``races(module, name, times=1)``: make ``module.name`` lose a lock race (end its
    transaction as PostgreSQL ends a deadlock's loser, SQLSTATE 40P01) the first ``times`` times
    it is called, with no pause between retries. Returns the list of calls."""
    from django.db import connection

    from brain.db import retry

    def lose() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$"
            )

    def install(module, name: str, times: int = 1) -> list:
        original, calls = getattr(module, name), []

        def losing(*args, **kwargs):
            calls.append(1)
            if len(calls) <= times:
                lose()
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, losing)
        monkeypatch.setattr(retry.time, "sleep", lambda seconds: None)
        return calls

    return install


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password=PASSWORD)


@pytest.fixture
def celery_worker(transactional_db):
    """A real worker process on the test database; tests that use it see committed rows only."""
    from django.db import connection

    with testing.celery_worker(connection.settings_dict) as process:
        yield process


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=testing.CHROMIUM, args=testing.CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server):
    """A fresh browser context (no cookies) with ``page.base_url`` set to the live server."""
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(10_000)
    browser_page = context.new_page()
    yield browser_page
    context.close()


@pytest.fixture
def signed_in_page(page, admin_user):
    """A browser page signed in through the real login form as the admin."""
    from brain.tests.pages import sign_in

    sign_in(page, admin_user.username, PASSWORD)
    return page
