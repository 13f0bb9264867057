"""One answer to a form post, with or without JavaScript (``brain.htmx``): htmx gets the partial
it swaps with a toast and the events other regions listen for; a plain form gets a redirect back
and the same words as a message; a form filled in wrong comes back as it was typed."""

from __future__ import annotations

import json

import pytest
from django import forms
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.exceptions import ValidationError
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from brain import htmx
from brain.errors import StateConflict
from brain.htmx import Toast

PAGE = (
    "<h1>The page{% if title %}: {{ title }}{% endif %}</h1>\n"
    '{% partialdef row inline %}<p id="row">{{ text }}{% if error %} ({{ error }}){% endif %}</p>'
    "{% endpartialdef %}\n"
)


@pytest.fixture(autouse=True)
def page(settings, tmp_path):
    (tmp_path / "page.html").write_text(PAGE)
    settings.TEMPLATES = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [tmp_path],
            "APP_DIRS": False,
        }
    ]


def _post(*, with_htmx: bool):
    headers = {"HX-Request": "true"} if with_htmx else {}
    request = RequestFactory().post("/somewhere", headers=headers)
    request.htmx = HtmxDetails(request)
    request._messages = CookieStorage(request)
    return request


def _said(request) -> list[tuple[str, str]]:
    return [(message.level_tag, message.message) for message in request._messages]


def _triggered(response) -> dict:
    return json.loads(response["HX-Trigger"])


def test_an_htmx_post_gets_the_partial_with_its_toast_and_its_event():
    request = _post(with_htmx=True)

    response = htmx.answer(
        request,
        "page.html#row",
        {"text": "Kept."},
        back="/page",
        event="rowChanged",
        toast=Toast("Kept the loft."),
    )

    assert response.status_code == 200
    assert response.content.decode() == '<p id="row">Kept.</p>'
    assert _triggered(response) == {
        "rowChanged": {},
        "showToast": {"text": "Kept the loft.", "level": "success"},
    }
    assert _said(request) == []


def test_the_same_post_without_javascript_goes_back_with_the_toast_as_a_message():
    request = _post(with_htmx=False)

    response = htmx.answer(
        request,
        "page.html#row",
        {"text": "Kept."},
        back="/page?memory=home",
        event="rowChanged",
        toast=Toast("That line was no longer waiting.", "warning"),
    )

    assert (response.status_code, response["Location"]) == (302, "/page?memory=home")
    assert "HX-Trigger" not in response
    assert _said(request) == [("warning", "That line was no longer waiting.")]


def test_news_the_partial_shows_itself_raises_no_toast_but_is_said_without_javascript():
    with_js, without_js = _post(with_htmx=True), _post(with_htmx=False)
    said = Toast("Forgotten.", "info")

    swapped = htmx.answer(with_js, "page.html#row", {"text": "Forgotten."}, back="/", said=said)
    htmx.answer(without_js, "page.html#row", {"text": "Forgotten."}, back="/", said=said)

    assert "HX-Trigger" not in swapped
    assert swapped.content.decode() == '<p id="row">Forgotten.</p>'
    assert _said(without_js) == [("info", "Forgotten.")]


def test_a_form_filled_in_wrong_comes_back_as_typed_in_the_partial_or_the_whole_page():
    typed = {"text": "The lof is warm", "error": "no such room"}
    with_js, without_js = _post(with_htmx=True), _post(with_htmx=False)
    toast = Toast("Nothing was saved.", "error")

    swapped = htmx.again(
        with_js, "page.html#row", typed, page=lambda: {"title": "Home"}, toast=toast
    )
    whole = htmx.again(
        without_js, "page.html#row", typed, page=lambda: {"title": "Home"}, toast=toast
    )

    assert swapped.status_code == whole.status_code == 200
    assert swapped.content.decode() == '<p id="row">The lof is warm (no such room)</p>'
    assert _triggered(swapped) == {"showToast": {"text": "Nothing was saved.", "level": "error"}}
    assert "<h1>The page: Home</h1>" in whole.content.decode()
    assert '<p id="row">The lof is warm (no such room)</p>' in whole.content.decode()
    assert _said(without_js) == [("error", "Nothing was saved.")]


def test_a_toast_is_one_of_the_levels_a_page_can_show():
    with pytest.raises(ValueError, match="success, info, warning or error"):
        Toast("Kept.", "fatal")


def test_a_refusal_is_said_in_the_same_words_whatever_refused_it():
    class Size(forms.Form):
        size = forms.IntegerField(error_messages={"invalid": "A size is a whole number."})

    typed = Size({"size": "big"})
    assert not typed.is_valid()
    assert htmx.reason(typed) == "A size is a whole number."
    assert htmx.reason(ValidationError(["Too long.", "Say less."])) == "Too long. Say less."
    assert htmx.reason(StateConflict("Someone settled it first.")) == "Someone settled it first."


def test_a_refused_form_shows_its_words_in_place_with_htmx_and_as_a_message_without():
    refusal = ValidationError("That fact is too long.")

    response = htmx.refused(
        _post(with_htmx=True), "page.html#row", {"text": "A long fact"}, refusal, back="/page"
    )
    assert response.status_code == 200
    assert response.content.decode() == '<p id="row">A long fact (That fact is too long.)</p>'
    assert "HX-Trigger" not in response  # said in place: no toast over it

    request = _post(with_htmx=False)
    response = htmx.refused(request, "page.html#row", {}, refusal, back="/page")
    assert (response.status_code, response["Location"]) == (302, "/page")
    assert _said(request) == [("error", "That fact is too long.")]
