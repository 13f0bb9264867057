import pytest
from django.urls import reverse

from brain.tests.pages import sign_in


def test_every_page_but_healthz_and_login_asks_a_stranger_to_sign_in(client, db):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))

    assert client.get(reverse("login")).status_code == 200
    assert client.get("/healthz").status_code in (200, 503)


def test_an_htmx_request_after_the_session_expired_sends_the_whole_page_to_login(client, db):
    response = client.get(
        "/", headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/admin/?q=1"}
    )

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=%2Fadmin%2F%3Fq%3D1"


def test_the_admin_is_titled_for_the_product(admin_client):
    response = admin_client.get("/admin/")
    assert b"brain administration" in response.content


@pytest.mark.browser
def test_signing_in_through_the_login_form_shows_the_navigation(page, admin_user, password):
    page.goto("/")
    assert "/login/" in page.url

    sign_in(page, admin_user.username, password)

    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="House").is_visible()
    assert nav.get_by_role("link", name="Admin").is_visible()
    assert page.get_by_text(admin_user.username, exact=True).is_visible()


@pytest.mark.browser
def test_a_wrong_password_is_refused_with_a_message_and_the_username_kept(page, admin_user):
    page.goto("/login/")
    sign_in(page, admin_user.username, "not the password", expect_success=False)

    assert page.get_by_role("alert").inner_text().startswith("That username and password")
    assert page.get_by_label("Username").input_value() == admin_user.username


@pytest.mark.browser
def test_a_toast_can_be_dismissed(page, admin_user, password):
    sign_in(page, admin_user.username, password)
    page.evaluate(
        "document.body.dispatchEvent(new CustomEvent('showToast',"
        " {detail: {text: 'Saved.', level: 'error'}}))"
    )
    toast = page.locator(".toast", has_text="Saved.")
    assert toast.is_visible()
    toast.get_by_role("button", name="Dismiss").click()
    assert toast.count() == 0
