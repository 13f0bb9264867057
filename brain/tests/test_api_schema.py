"""The API's schema is for people who may use the API: it asks for a sign-in like every page."""

from rest_framework.authtoken.models import Token


def test_the_schema_refuses_someone_not_signed_in(client, db):
    response = client.get("/api/schema/")

    assert response.status_code in (401, 403)
    assert b"openapi" not in response.content
    assert b"/api/memory/" not in response.content


def test_the_schema_refuses_a_wrong_token(client, db):
    response = client.get("/api/schema/", headers={"Authorization": "Token not-a-real-token"})

    assert response.status_code in (401, 403)
    assert b"openapi" not in response.content


def test_a_signed_in_person_gets_the_schema(client, alice):
    client.force_login(alice)

    response = client.get("/api/schema/")

    assert response.status_code == 200
    assert b"openapi" in response.content
    assert b"/api/memory/" in response.content


def test_a_token_gets_the_schema(client, alice):
    token = Token.objects.create(user=alice)

    response = client.get("/api/schema/", headers={"Authorization": f"Token {token.key}"})

    assert response.status_code == 200
    assert b"openapi" in response.content
