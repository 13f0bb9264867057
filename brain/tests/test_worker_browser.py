"""The model routes and the worker page on the Settings page in a real browser."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from brain import workers
from brain.models import ModelRoute, WaitingCall
from knowledge.models import Memory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_administrator_sends_reflection_to_a_worker_in_place_and_sees_a_call_wait_for_it(
    signed_in_page,
):
    page = signed_in_page
    page.goto("/settings/")
    page.evaluate("window.stayedOnThePage = true")
    routes = page.locator("#model-routes")

    routes.get_by_label("Who serves reflect").select_option("worker")
    routes.get_by_label("Model for reflect").fill("llama3.2")
    routes.get_by_role("button", name="Save routes").click()

    expect(page.locator("#toasts .toast")).to_contain_text(
        "Model calls for “reflect” now go to a worker (model llama3.2)."
    )
    expect(page.locator("#model-routes").get_by_label("Who serves reflect")).to_have_value("worker")
    assert page.evaluate("window.stayedOnThePage === true")
    route = ModelRoute.objects.get()
    assert (route.task, route.provider, route.model) == ("reflect", "worker", "llama3.2")

    home = Memory.objects.default()
    workers.create_token(memory=home, name="attic pc")
    WaitingCall.objects.create(
        memory=home,
        task="reflect",
        model="llama3.2",
        deadline=timezone.now() + timedelta(minutes=2),
    )
    page.reload()
    expect(page.locator("#workers")).to_contain_text("reflect (llama3.2) — waiting")
