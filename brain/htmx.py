"""Answering a form post, with or without JavaScript: every view's one way to do it.

Every action is a plain form (``action=`` as well as ``hx-post``), so each answer has two shapes:

- ``answer``: the action was done, or refused because of the state of things. htmx gets the
  partial it swaps (``"page.html#name"``, named after the DOM id it replaces), with the events
  other regions listen for and a toast (``showToast``) in ``HX-Trigger``. Without JavaScript the
  browser is sent back to the page (``back``), and the toast is a message there, in the same
  words at the same level. News the partial shows in itself (an inline error, a row's note) is
  ``said``: no toast over it with htmx, a message without JavaScript.
- ``again``: the form was filled in wrong, or needs a question answered first. It comes back as
  it was typed, status 200: the partial for htmx, the whole page without JavaScript.

- ``refused``: the form was refused, by its own checks (a ``forms.Form``'s errors), by a
  ``ValidationError`` or by the state of things (a ``brain.errors.StateConflict``): the partial
  with the words in the form's own error slot, said in place (no toast over it) for htmx; without
  JavaScript a redirect back with the same words as an error message. ``reason`` is those words
  wherever a page shows a refusal its own way (a toast, the form again).

htmx swaps nothing on a 4xx or 5xx, so refusals that are errors (a 400, a 403, a 503) raise
their toast from the middleware instead (``brain.inputs``, ``brain.middleware``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import trigger_client_event

from brain.errors import StateConflict, in_words

LEVELS = {
    "success": messages.SUCCESS,
    "info": messages.INFO,
    "warning": messages.WARNING,
    "error": messages.ERROR,
}


# What a page refuses a form with: ``except REFUSALS as refusal`` then ``refused`` or ``reason``.
REFUSALS = (ValidationError, StateConflict)
type Refusal = ValidationError | StateConflict | forms.BaseForm


@dataclass(frozen=True)
class Toast:
    """What a person is told after an action: the words, and how the toast is coloured."""

    text: str
    level: str = "success"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(
                f"A toast's level is success, info, warning or error, not {self.level!r}."
            )


def raise_toast(response: HttpResponse, toast: Toast) -> HttpResponse:
    return trigger_client_event(response, "showToast", {"text": toast.text, "level": toast.level})


def partial(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    event: str | None = None,
    toast: Toast | None = None,
    status: int = 200,
) -> HttpResponse:
    """``template`` ("page.html#name") rendered, raising ``event`` then ``toast``."""
    response = render(request, template, context, status=status)
    if event:
        response = trigger_client_event(response, event)
    return raise_toast(response, toast) if toast else response


def _from_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))  # django_htmx's middleware sets it


def _tell(request: HttpRequest, toast: Toast | None) -> None:
    if toast:
        messages.add_message(request, LEVELS[toast.level], toast.text)


def answer(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    back: str,
    toast: Toast | None = None,
    event: str | None = None,
    said: Toast | None = None,
) -> HttpResponse:
    """The partial with ``event`` and ``toast`` for htmx; without JavaScript a redirect to
    ``back`` (a URL or a URL name) with ``toast`` or ``said`` as the message."""
    if not _from_htmx(request):
        _tell(request, toast or said)
        return redirect(back)
    return partial(request, template, context, event=event, toast=toast)


def again(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    page: Callable[[], dict],
    toast: Toast | None = None,
) -> HttpResponse:
    """The form as typed: the partial ``template`` for htmx; without JavaScript the whole page
    (``template`` before its ``#``) with ``page()``'s context under ``context``."""
    if not _from_htmx(request):
        _tell(request, toast)
        return render(request, template.partition("#")[0], {**page(), **context})
    return partial(request, template, context, toast=toast)


def reason(refusal: Refusal) -> str:
    """The words a person reads for a refusal, in one line: a conflict's message, every message
    of a ``ValidationError``, or a form's errors (its fields' in order, then its own)."""
    if isinstance(refusal, forms.BaseForm):
        return " ".join(str(message) for errors in refusal.errors.values() for message in errors)
    return in_words(refusal)


def refused(
    request: HttpRequest,
    template: str,
    context: dict,
    refusal: Refusal,
    *,
    back: str,
    error: str = "error",
) -> HttpResponse:
    """``answer`` for a refused form: the partial with ``reason(refusal)`` under
    ``context[error]`` (the form's own error slot, so no toast over it) for htmx; without
    JavaScript a redirect to ``back`` with the words as an error message."""
    words = reason(refusal)
    said = Toast(words, "error")
    return answer(request, template, {**context, error: words}, back=back, said=said)
