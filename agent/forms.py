"""The Settings page's form for the pinned core, parsed as posted."""

from __future__ import annotations

from django import forms


class CoreForm(forms.Form):
    """The core's words, kept as typed: ``agent.actions.set_core`` checks them, as it does for
    the API and the terminal."""

    text = forms.CharField(required=False, strip=False)
