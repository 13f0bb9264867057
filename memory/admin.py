"""The document, its queue and log, and the facts a curator corrects — in the admin.

Fact and Conflict are knowledge's models, registered here because every write a curator makes
to them goes through ``memory.actions`` (a lower app never imports a higher one): a fact's words
are edited with ``fact_edits.edit_fact`` (the gate judges them, the change log records them,
undo reverts them), facts are forgotten and restored, conflicts settled. The document changes
only through its actions (undo here; edits on the Knowledge tab), never by hand in a form. The
rules every admin class follows (who sees what, read-only fields, all-or-nothing actions):
``knowledge/admin.py``.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Prefetch
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.text import Truncator

from brain import htmx
from knowledge import actions as knowledge_actions
from knowledge import reembedding
from knowledge.access import Permission
from knowledge.admin import (
    EVERYWHERE,
    FactSubjectInline,
    MemoryScopedAdmin,
    ObservationInline,
    ReadOnlyInline,
    RunLogAdmin,
    link_to,
    on_each_row,
)
from knowledge.embedding import embedder_for
from knowledge.models import Conflict, Fact, Subject
from memory import actions, fact_edits, revisions
from memory.models import (
    Brief,
    Change,
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    ReflectionRun,
    StudySession,
)

LIST_TEXT_CHARS = 120  # a fact or item in a list: a line of the screen, the rest on its page


def _short(text: str) -> str:
    return Truncator(text).chars(LIST_TEXT_CHARS)


# Facts ---------------------------------------------------------------------------------------


class FactForm(forms.ModelForm):
    """Only the words are edited here, and only through ``edit_fact`` (see FactAdmin)."""

    class Meta:
        model = Fact
        fields = ["text"]
        widgets = {"text": forms.Textarea(attrs={"rows": 3, "cols": 80})}

    def clean_text(self) -> str:
        return fact_edits.check_words(self.cleaned_data.get("text"))


@admin.register(Fact)
class FactAdmin(MemoryScopedAdmin):
    """Every fact, findable by its words or by any name of what it is about (a device's
    nickname or entity id finds its facts). Saving new words edits the fact through
    ``fact_edits.edit_fact`` and opens the fact that now says them; everything else on the
    page is what actions decide, read-only."""

    form = FactForm
    list_display = [
        "statement",
        "about",
        "taught_by_name",
        "created_at",
        "status",
        "confidence",
        "support",
        "in_document",
        "memory",
    ]
    list_filter = ["status", "kind", "valence", "channel", "in_document", "subject_removed"]
    search_fields = ["text"]  # searched by Fact.objects.matching: subjects' names too
    search_help_text = "Words of the fact, or a name, nickname or entity id of what it is about."
    date_hierarchy = "created_at"
    fields = [
        "text",
        "memory",
        "status",
        "kind",
        "valence",
        "outcome",
        "confidence",
        "prior",
        "support",
        "successes",
        "failures",
        "channel",
        "taught_by_name",
        "source",
        "valid_from",
        "valid_to",
        "superseded_by",
        "expires_at",
        "forgotten_at",
        "forgotten_reason",
        "subject_removed",
        "in_document",
        "embedder",
        "uid",
        "created_at",
    ]
    editable = ("text",)
    inlines = [FactSubjectInline, ObservationInline]
    actions = ["forget", "restore", "expire", "reembed"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .without_vectors()
            .select_related("memory")
            .prefetch_related(
                Prefetch(
                    "subjects",
                    queryset=Subject.objects.as_system(
                        "pages of facts the list already read for its reader"
                    ).only("pk", "name"),
                )
            )
        )

    def get_search_results(self, request, queryset, search_term):
        words = search_term.strip()
        return (queryset.matching(words) if words else queryset), False

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and not obj.is_live:  # only words in use are edited
            return self.get_fields(request, obj)
        return super().get_readonly_fields(request, obj)

    @admin.display(description="fact", ordering="text")
    def statement(self, fact: Fact) -> str:
        return _short(fact.text)

    @admin.display(description="about")
    def about(self, fact: Fact) -> str:
        return ", ".join(subject.name for subject in fact.subjects.all()) or "—"

    # Editing the words ----------------------------------------------------------------------

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Saving edits through edit_fact, which opens its own transactions (one per step): the
        # admin's request-wide transaction would hold the gate's model call inside it.
        if request.method == "POST":
            # private ModelAdmin API (changeform_view without its transaction), not in django-stubs
            return self._changeform_view(request, object_id, form_url, extra_context)  # type: ignore[attr-defined]
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change) -> None:
        if "text" not in form.changed_data:
            return
        try:
            request.fact_edit = fact_edits.edit_fact(
                fact=obj, text=form.cleaned_data["text"], by=request.user
            )
        except htmx.REFUSALS as refusal:
            request.fact_edit = htmx.reason(refusal)

    def response_change(self, request, obj):
        edited = getattr(request, "fact_edit", None)
        if edited is None:
            self.message_user(request, "Nothing changed.")
            return redirect(request.path)
        if isinstance(edited, str):
            self.message_user(request, edited, messages.ERROR)
            return redirect(request.path)
        self.message_user(request, edited.message)
        return redirect(reverse("admin:knowledge_fact_change", args=[edited.fact.pk]))

    # Actions ---------------------------------------------------------------------------------

    @on_each_row(Permission.CURATE, "Forget")
    def forget(self, request, fact: Fact) -> str:
        return f"#{fact.pk} “{_short(fact.text)}”: " + actions.forget(fact=fact, by=request.user)

    @on_each_row(Permission.CURATE, "Restore (forgotten moments ago)")
    def restore(self, request, fact: Fact) -> str:
        actions.restore(fact=fact, by=request.user)
        return f"Kept #{fact.pk} “{_short(fact.text)}”."

    @admin.action(permissions=["curate"], description="Re-run expiry", location=EVERYWHERE)
    def expire(self, request, queryset) -> None:
        def expire(facts: list[Fact]) -> str:
            among = Fact.objects.as_system("the facts the curator chose from the list").filter(
                pk__in=[fact.pk for fact in facts]
            )
            expired = knowledge_actions.expire_facts(among=among)
            return f"{expired} of {len(facts)} past their date expired; the rest are in date."

        self.act_once(request, queryset, Permission.CURATE, expire)

    @admin.action(permissions=["curate"], description="Re-embed", location=EVERYWHERE)
    def reembed(self, request, queryset) -> None:
        def reembed(facts: list[Fact]) -> str:
            done = reembedding.reembed(
                facts=Fact.objects.as_system("the facts the curator chose from the list").filter(
                    pk__in=[f.pk for f in facts]
                )
            )
            names = sorted({embedder_for(fact.memory_id).name for fact in facts})
            embedders = "embedder" if len(names) == 1 else "embedders"
            return f"Re-embedded {done} with the {' and '.join(names)} {embedders}."

        self.act_once(request, queryset, Permission.CURATE, reembed)


# Conflicts -------------------------------------------------------------------------------------


@admin.register(Conflict)
class ConflictAdmin(MemoryScopedAdmin):
    """Two statements the gate was not sure about; settled only through ``settle_conflict``."""

    list_display = ["old_fact", "new_fact", "reason", "state", "resolution", "created_at"]
    list_filter = ["state", "resolution"]
    search_fields = ["old__text", "new__text", "reason"]
    date_hierarchy = "created_at"
    fields = [
        "memory",
        "old",
        "new",
        "reason",
        "state",
        "resolution",
        "settled_by_name",
        "settled_at",
        "created_at",
    ]
    actions = ["keep_new", "keep_old", "keep_both"]

    def get_queryset(self, request):
        vectors = ["old__embedding", "old__search_vector", "new__embedding", "new__search_vector"]
        return super().get_queryset(request).select_related("old", "new", "memory").defer(*vectors)

    @admin.display(description="old", ordering="old__text")
    def old_fact(self, conflict: Conflict) -> str:
        return link_to(conflict.old, _short(conflict.old.text))

    @admin.display(description="new", ordering="new__text")
    def new_fact(self, conflict: Conflict) -> str:
        return link_to(conflict.new, _short(conflict.new.text))

    @staticmethod
    def _settle(request, conflict: Conflict, keep: str) -> str:
        return actions.settle_conflict(conflict=conflict, keep=keep, by=request.user).message

    @on_each_row(Permission.CURATE, "Keep the new one")
    def keep_new(self, request, conflict: Conflict) -> str:
        return self._settle(request, conflict, Conflict.Resolution.KEEP_NEW)

    @on_each_row(Permission.CURATE, "Keep the old one")
    def keep_old(self, request, conflict: Conflict) -> str:
        return self._settle(request, conflict, Conflict.Resolution.KEEP_OLD)

    @on_each_row(Permission.CURATE, "Keep both")
    def keep_both(self, request, conflict: Conflict) -> str:
        return self._settle(request, conflict, Conflict.Resolution.KEEP_BOTH)


# The queue -----------------------------------------------------------------------------------


@admin.register(InboxItem)
class InboxItemAdmin(MemoryScopedAdmin):
    """Candidates waiting to be filed; dropped only through ``drop_inbox_item``."""

    list_display = [
        "statement",
        "action",
        "origin",
        "confidence",
        "state",
        "taught_by_name",
        "created_at",
        "memory",
    ]
    list_filter = ["state", "origin", "action", "confidence"]
    list_select_related = ["memory"]
    search_fields = ["text", "taught_by_name"]
    date_hierarchy = "created_at"
    actions = ["drop"]

    @admin.display(description="item", ordering="text")
    def statement(self, item: InboxItem) -> str:
        return _short(item.text)

    @on_each_row(Permission.CURATE, "Drop from the queue")
    def drop(self, request, item: InboxItem) -> str:
        if actions.drop_inbox_item(item=item, by=request.user):
            return f"Dropped “{_short(item.text)}”."
        return f"“{_short(item.text)}” was no longer waiting; nothing changed."


# The document and its log ----------------------------------------------------------------------


class ChangeInline(ReadOnlyInline):
    model = Change
    fields = ["number", "summary", "source", "author_name", "undone_by", "created_at"]


class ItemInline(ReadOnlyInline):
    """The items a pass read."""

    model = InboxItem
    fields = ["text", "action", "state", "taught_by_name", "created_at"]


@admin.register(DocumentRevision)
class DocumentRevisionAdmin(MemoryScopedAdmin):
    """Every version of the document; it changes only through its actions (edit and undo on the
    Knowledge tab, undo in the change log here)."""

    list_display = ["memory", "generation", "kind", "author", "size_bytes", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["memory", "author"]
    search_fields = ["text"]
    date_hierarchy = "created_at"
    fields = ["memory", "generation", "kind", "author", "run", "created_at", "text", "voice"]
    inlines = [ChangeInline]


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(MemoryScopedAdmin):
    list_display = [
        "pk",
        "memory",
        "state",
        "trigger",
        "composer",
        "items_read",
        "lines_added",
        "lines_removed",
        "lines_replaced",
        "started_at",
        "finished_at",
    ]
    list_filter = ["state", "trigger"]
    list_select_related = ["memory"]
    search_fields = ["reason", "executor"]
    date_hierarchy = "started_at"
    inlines = [ChangeInline, ItemInline]


@admin.register(Change)
class ChangeAdmin(MemoryScopedAdmin):
    """The change log; a change is undone through ``undo_change``, as on the Knowledge tab."""

    list_display = ["number", "summary", "source", "author_name", "undone", "created_at", "memory"]
    list_display_links = ["number", "summary"]
    list_filter = ["source"]
    list_select_related = ["memory"]
    search_fields = ["summary", "author_name"]
    date_hierarchy = "created_at"
    fields = [
        "memory",
        "number",
        "summary",
        "source",
        "author_name",
        "revision",
        "run",
        "reverts",
        "undone_by",
        "created_at",
        "operations",
    ]
    ordering = ["memory", "-number"]
    actions = ["undo"]

    @admin.display(boolean=True, description="undone")
    def undone(self, change: Change) -> bool:
        return change.undone_by_id is not None

    @admin.action(permissions=["curate"], description="Undo", location=EVERYWHERE)
    def undo(self, request, queryset) -> None:
        def undo(change: Change) -> str:
            undone = revisions.undo_change(
                memory=change.memory, number=change.number, by=request.user
            )
            return f"Undone: {undone.summary.removeprefix('Undid ')}"

        # Newest first: a later change on the same lines is undone before the one under it.
        self.act(request, queryset.order_by("-number"), Permission.CURATE, undo)


@admin.register(Brief)
class BriefAdmin(MemoryScopedAdmin):
    list_display = ["written_at", "memory", "composer", "text"]
    list_select_related = ["memory"]
    search_fields = ["text"]
    date_hierarchy = "written_at"


@admin.register(ReflectionRun)
class ReflectionRunAdmin(RunLogAdmin):
    """What each reflection over a conversation read, filed, or why it filed nothing. Written
    only by the reflection pass (memory/reflection.py)."""

    list_display = [
        "pk",
        "memory",
        "source",
        "state",
        "extractor",
        "since_turn",
        "read_to",
        "started_at",
        "finished_at",
    ]
    list_filter = ["state", "extractor"]
    list_select_related = ["memory", "source"]
    search_fields = ["reason", "source__title", "source__reference"]
    date_hierarchy = "started_at"
    fields = [
        "memory",
        "source",
        "state",
        "reason",
        "extractor",
        "since_turn",
        "read_to",
        "turns_read",
        "statements",
        "filed",
        "notes",
        "started_at",
        "claimed_at",
        "executor",
        "lease_expires_at",
        "finished_at",
    ]


@admin.register(StudySession)
class StudySessionAdmin(RunLogAdmin):
    """Each study session: what it studied, read and found, and what it filed (memory/study.py
    writes it; the Study button and ``brain learn`` start one)."""

    list_display = ["pk", "topic", "state", "facts_read", "filed", "started_at", "memory"]
    list_filter = ["state", "chosen"]
    list_select_related = ["memory"]
    search_fields = ["topic", "report"]
    date_hierarchy = "started_at"
