"""The database or the broker not answering is a 503 with Retry-After, never a 500 and never a
traceback, wherever it surfaces: in a view or in a middleware before it, for the API (JSON),
for htmx (a toast) and for a page (a plain "brain is restarting" page that itself reads no
database). Any other error is a plain 500 with no traceback, a missing page a plain 404.

brain/tests/test_outage.py stops a real PostgreSQL under real writers; these pin each answer's
shape."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import OperationalError
from django.test import Client
from kombu.exceptions import OperationalError as BrokerError

from brain import api_errors
from brain.db import retry

pytestmark = pytest.mark.django_db


def _refused() -> OperationalError:
    """What Django raises when the server is gone: its error, from the driver's (no SQLSTATE)."""
    try:
        try:
            raise psycopg.OperationalError("connection failed: No such file or directory")
        except psycopg.OperationalError as driver:
            raise OperationalError(str(driver)) from driver
    except OperationalError as error:
        return error


class _Shutdown(psycopg.OperationalError):
    sqlstate = "57P01"  # "terminating connection due to administrator command"


class _TimedOut(psycopg.OperationalError):
    sqlstate = "57014"  # a statement over its timeout: the server answered


def _wrapped(driver: Exception) -> OperationalError:
    error = OperationalError(str(driver))
    error.__cause__ = driver
    return error


@pytest.mark.parametrize(
    ("error", "heading"),
    [
        (_refused(), "brain is restarting"),
        (_wrapped(_Shutdown("terminating connection")), "brain is restarting"),
        (BrokerError("Error 111 connecting to valkey.sock"), "brain is restarting"),
        (_wrapped(type("Deadlock", (psycopg.OperationalError,), {"sqlstate": "40P01"})()), "Busy"),
    ],
)
def test_what_is_a_503(error, heading):
    answer = api_errors.unavailable(error)

    assert answer is not None and answer.heading.startswith(heading)
    assert answer.retry_after >= 1


@pytest.mark.parametrize(
    "error", [_wrapped(_TimedOut("canceling statement")), RuntimeError("a bug"), ValueError()]
)
def test_what_is_not(error):
    assert api_errors.unavailable(error) is None


@pytest.fixture
def browser(admin_user, home):
    """A signed-in client that gets the answer a browser would, not the exception."""
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    return client


@pytest.fixture
def database_gone_in_view(monkeypatch):
    """The House page's view and the API's context view meet a database that went away."""
    import knowledge.api
    import surfaces.views.house

    def gone(*args, **kwargs):
        raise _refused()

    monkeypatch.setattr(surfaces.views.house, "overview", gone)
    monkeypatch.setattr(knowledge.api.retrieval, "context", gone)


@pytest.fixture
def database_gone_before_the_view(monkeypatch):
    """Every request meets it in a middleware, before any view (the current memory's lookup)."""
    import knowledge.current

    def gone(request):
        raise _refused()

    monkeypatch.setattr(knowledge.current, "resolve", gone)


def _restarting_page(response) -> str:
    assert response.status_code == 503
    assert response["Retry-After"] == str(api_errors.RESTARTING_RETRY_AFTER_S)
    body = response.content.decode()
    assert "brain is restarting" in body and 'href="/static/css/brain.css"' in body
    assert "Traceback" not in body and "OperationalError" not in body
    return body


def test_a_page_is_a_plain_restarting_page(browser, database_gone_before_the_view):
    _restarting_page(browser.get("/"))


def test_a_page_whose_view_meets_it_is_the_same_page(browser, database_gone_in_view):
    _restarting_page(browser.get("/"))


def test_htmx_gets_a_503_that_raises_a_toast(browser, database_gone_before_the_view):
    response = browser.get("/knowledge/facts", headers={"HX-Request": "true"})

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    toast = json.loads(response["HX-Trigger"])["showToast"]
    assert toast["level"] == "warning" and "brain is restarting" in toast["text"]


def test_the_api_answers_json_before_its_view(browser, database_gone_before_the_view):
    response = browser.post("/api/memory/add", {"fact": "The loft is warm"}, "application/json")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {"detail": api_errors.DATABASE_AWAY}


def test_the_api_answers_json_from_its_view(browser, database_gone_in_view):
    response = browser.post("/api/context", {"question": "the loft"}, "application/json")

    assert response.status_code == 503
    assert response.json() == {"detail": api_errors.DATABASE_AWAY}
    assert response["Retry-After"] == "5"


def test_a_lost_lock_race_keeps_its_own_words(browser, monkeypatch):
    import knowledge.current

    def lost(request):
        raise _wrapped(type("Deadlock", (psycopg.OperationalError,), {"sqlstate": "40P01"})())

    monkeypatch.setattr(knowledge.current, "resolve", lost)

    response = browser.get("/")

    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert retry.BUSY_MESSAGE in response.content.decode()


def test_any_other_error_is_a_plain_500_page_or_json_without_a_traceback(browser, monkeypatch):
    import knowledge.current

    def bug(request):
        raise RuntimeError("a bug with a secret in its message")

    monkeypatch.setattr(knowledge.current, "resolve", bug)

    page = browser.get("/")
    api = browser.get("/api/status/")

    assert page.status_code == 500 and "Something went wrong" in page.content.decode()
    assert "secret" not in page.content.decode() and "Traceback" not in page.content.decode()
    assert api.status_code == 500 and "secret" not in api.content.decode()
    assert api.json()["detail"].startswith("Something went wrong on brain's side")


def test_a_missing_page_is_a_plain_404_in_brains_look(browser):
    response = browser.get("/no-such-page/")

    body = response.content.decode()
    assert response.status_code == 404
    assert "Not found" in body and 'href="/static/css/brain.css"' in body
    assert "URLconf" not in body and "api/" not in body
