"""What every app's forms share."""

from __future__ import annotations

from django import forms


def as_typed(**options) -> forms.CharField:
    """Words as typed, not required: the action they reach checks them, as it does for the API
    and the terminal, and says what is wrong in its own words."""
    return forms.CharField(required=False, strip=False, **options)


class Many(forms.Field):
    """Every value posted under one name (ticked boxes, a multiple select), as typed; none is
    an empty list."""

    widget = forms.MultipleHiddenInput

    def __init__(self, **options):
        super().__init__(required=False, **options)

    def to_python(self, value) -> list[str]:
        return list(value or [])


class BackForm(forms.Form):
    """A form that says where back is (``next``): a path on this site, else the view's own."""

    next = as_typed()

    def clean_next(self) -> str:
        back = self.cleaned_data["next"]
        return back if back.startswith("/") and not back.startswith("//") else ""

    def back(self, default: str) -> str:
        self.is_valid()  # ``next`` is cleaned even when another field is wrong
        return self.cleaned_data.get("next") or default
