import pytest
from django.db import connection

from brain import embedded
from brain.celery import app


def test_healthz_names_the_database_pgvector_and_broker_as_ok_without_signing_in(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["status"] == "ok"
    assert body["database"]["pgvector"].startswith("0.8")
    assert body["database"]["postgresql"].startswith("18")
    assert body["broker"]["status"] == "ok"


def test_healthz_answers_503_naming_the_broker_when_it_is_down(client, db, tmp_path):
    missing = embedded.EmbeddedValkey(name="not-running")
    assert missing.running_pid() is None
    original = app.conf.broker_url
    # A unix socket nobody listens on, outside the embedded folder so nothing starts it.
    app.conf.broker_url = f"redis+socket://{tmp_path}/nobody.sock"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = original

    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["broker"]
    assert body["broker"]["status"] == "down"
    assert body["broker"]["error"]
    assert body["database"]["status"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_healthz_answers_503_naming_the_database_when_it_cannot_be_reached(client):
    original = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = "brain_no_such_database"
    try:
        response = client.get("/healthz")
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original

    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["database"]
    assert "brain_no_such_database" in body["database"]["error"]
    assert body["broker"]["status"] == "ok"
