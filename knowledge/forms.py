"""The Sources tab's and the Pages tab's forms, and Review's labels, parsed as posted."""

from __future__ import annotations

from django import forms

from brain.forms import BackForm, Many, as_typed
from knowledge.models import Passage, Role


class SourceForm(forms.Form):
    """A note (``text``) or a file, its ``title`` and the ``labels`` its passages get: kept as
    typed, for ``knowledge.sources.add_source`` checks them, as it does for the API."""

    title = as_typed()
    text = as_typed()
    file = forms.Field(required=False, widget=forms.FileInput)
    labels = Many()


class LabelsForm(forms.Form):
    """The labels chosen for a passage, by name."""

    labels = Many()


class PassageLabelsForm(forms.Form):
    """The labels chosen for each of ``passages`` (``labels-<passage id>``), by name."""

    def __init__(self, data, passages: list[Passage]):
        super().__init__(data)
        for passage in passages:
            self.fields[f"labels-{passage.pk}"] = Many()

    def chosen(self, passage: Passage) -> list[str]:
        return self.cleaned_data[f"labels-{passage.pk}"]


class ReadAsForm(BackForm):
    """Read as a role (``role``, an id among ``roles``) or a person (``person``, a username)."""

    role = as_typed()
    person = forms.CharField(required=False)

    def __init__(self, data, roles):
        super().__init__(data)
        self.roles = roles

    def clean_role(self) -> Role | None:
        role = self.cleaned_data["role"]
        return self.roles.filter(pk=int(role)).first() if role.isdecimal() else None
