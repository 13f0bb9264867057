"""The forms of the Knowledge tab, the Settings page and a page's curation, parsed as posted.

Each field is read as the page sends it; what an action checks for every surface (a fact's
words, a route's model) it still checks, and the page shows its refusal (``brain.htmx``)."""

from __future__ import annotations

from django import forms
from django.utils.dateparse import parse_date

from brain.forms import BackForm, Many, as_typed
from knowledge.models import MEMORY_MAX_KB_RANGE, Subject


class TextForm(forms.Form):
    """One box of words: the ask bar, Teach it something, the memory document's editor."""

    text = as_typed()


class DocumentForm(TextForm):
    """The document's editor: its words and the generation they were read at (-1 when the
    posted one is not a number, which ``save_user_edit`` takes as moved on)."""

    base_generation = as_typed()

    def clean_base_generation(self) -> int:
        try:
            return int(self.cleaned_data["base_generation"])
        except ValueError:
            return -1


class OutcomeForm(forms.Form):
    """This worked (1) / this was wrong (0) on a fact an answer used."""

    success = forms.TypedChoiceField(
        choices=[("1", "it worked"), ("0", "it was wrong")], coerce=lambda value: value == "1"
    )


class TopicForm(forms.Form):
    """The Study button's topic."""

    topic = as_typed()


class SwitchesForm(forms.Form):
    """The kill switches: a box is on when the browser posts it ticked ("on")."""

    learning = as_typed()
    memory_injection = as_typed()

    def clean_learning(self) -> bool:
        return self.cleaned_data["learning"] == "on"

    def clean_memory_injection(self) -> bool:
        return self.cleaned_data["memory_injection"] == "on"


class DocumentSizeForm(forms.Form):
    """How much the memory document may hold, in KB, within MEMORY_MAX_KB_RANGE."""

    memory_max_kb = forms.CharField(required=False)

    def clean_memory_max_kb(self) -> int:
        low, high = MEMORY_MAX_KB_RANGE
        try:
            size: int | None = int(self.cleaned_data["memory_max_kb"])
        except ValueError:
            size = None
        if size is None or not low <= size <= high:
            raise forms.ValidationError(
                f"The document's size is a whole number of KB from {low} to {high}."
            )
        return size

    def typed(self) -> str:
        """The size as it was typed, to show it again."""
        return (self["memory_max_kb"].value() or "").strip()


class RoutesForm(forms.Form):
    """Each task's provider and model (``provider:<task>``, ``model:<task>``); one not posted
    stays as it is (``routes``, the rows the page shows)."""

    PARTS = ("provider", "model")

    def __init__(self, data, routes: list[dict]):
        super().__init__(data)
        self.routes = routes
        for row in routes:
            for part in self.PARTS:
                self.fields[f"{part}:{row['task']}"] = as_typed()

    def wanted(self) -> dict[str, tuple[str, str]]:
        def posted(row: dict, part: str) -> str:
            name = f"{part}:{row['task']}"
            return self.cleaned_data[name] if name in self.data else row[part]

        return {row["task"]: (posted(row, "provider"), posted(row, "model")) for row in self.routes}


class SettleForm(BackForm):
    """How a conflict is settled: ``keep`` (new, old, both, dated, merged), with ``since`` (a
    day) for dated and ``text`` for merged."""

    keep = as_typed()
    since = forms.CharField(required=False)
    text = as_typed()

    def clean_since(self):
        since = self.cleaned_data["since"]
        if not since:
            return None
        try:
            day = parse_date(since)
        except ValueError:  # well formed, but no such day: 2026-02-30
            day = None
        if day is None:
            raise forms.ValidationError(f"“{since}” is not a day: write it as 2026-03-01.")
        return day


class MergePagesForm(forms.Form):
    """The page (``merged``, an id) to merge into this one, among ``pages``."""

    merged = forms.ModelChoiceField(
        queryset=Subject.objects.none(),
        error_messages={
            "required": "Choose the page to merge into this one.",
            "invalid_choice": "Choose the page to merge into this one.",
        },
    )

    def __init__(self, data, pages):
        super().__init__(data)
        self.fields["merged"].queryset = pages  # type: ignore[attr-defined]


class SplitPageForm(forms.Form):
    """The ``facts`` (ids) to move off a page onto a new one, its ``name`` and ``kind``."""

    facts = Many()
    name = as_typed()
    kind = as_typed()

    def clean_facts(self) -> list[int]:
        return [int(fact) for fact in self.cleaned_data["facts"] if fact.isdecimal()]


class EditFactForm(BackForm):
    """A fact's new words."""

    text = as_typed()
