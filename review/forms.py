"""The Findings tab's forms on a card, parsed as posted.

A value no button or field on the page offers (a scope, a way of settling, an answer) makes the
form invalid, and the view refuses it as a request the page did not send; what a person typed
(a reason, a day) is checked by the action, which says what is wrong."""

from __future__ import annotations

from django import forms

from brain.forms import as_typed
from review.models import MAX_REASON, Finding, Rule

UNTIL = [
    ("good", "for good"),
    ("month", "for a month"),
    ("season", "for a season"),
    ("date", "until a date"),
]


class ReasonForm(forms.Form):
    """Why, in a person's words: trimmed, and cut at MAX_REASON."""

    reason = forms.CharField(required=False)

    def clean_reason(self) -> str:
        return self.cleaned_data["reason"][:MAX_REASON]


class NotAProblemForm(ReasonForm):
    """Not a problem: how far the rule reaches (``scope``, the sensor unless posted) and for how
    long (``until``, for good unless posted; ``until_date`` for a date), and ``confirmed``
    (yes) once a wide rule was asked about."""

    scope = as_typed()
    until = as_typed()
    until_date = as_typed()
    confirmed = as_typed()

    def _posted(self, name: str, default: str) -> str:
        return self.cleaned_data[name] if name in self.data else default

    def clean_scope(self) -> str:
        scope = self._posted("scope", Rule.Scope.SENSOR)
        if scope not in Rule.Scope.values:
            raise forms.ValidationError("No scope of that name.")
        return scope

    def clean_until(self) -> str:
        until = self._posted("until", "good")
        if until not in dict(UNTIL):
            raise forms.ValidationError("No length of that name.")
        return until

    def clean_until_date(self) -> str:
        return self.cleaned_data["until_date"][:10]

    def clean_confirmed(self) -> bool:
        return self.cleaned_data["confirmed"] == "yes"


class MarkFixedForm(forms.Form):
    """I've already fixed it, Got it, or Done."""

    how = forms.ChoiceField(choices=Finding.Settled.choices)


class AnswerGuessForm(ReasonForm):
    """✓ Yes or ✕ No on a guess, with an optional reason."""

    answer = forms.ChoiceField(choices=[("yes", "Yes"), ("no", "No")])
