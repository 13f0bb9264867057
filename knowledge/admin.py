"""The admin, shaped for a curator, and the rules every app's admin classes follow.

- **Who sees and changes what** is decided by ``knowledge.access``, per memory, as on every other
  surface, and **what they may read** by the read layer (``knowledge.read_layer``): a list, a
  change page, an inline and an autocomplete hold only rows of the memories the person may read
  that they may read (every ``ReadQuerySet`` is read ``readable_by`` the person, here, once for
  every admin class), and a row's related row they may not read is shown as "—" (never its
  text: a fact's successor, an item's fact). Changing a row, and every
  action, needs curate in its memory (administer for a memory's settings and who may do what;
  answering a guess needs teach, as on the Findings tab). Superusers administer every memory.
  Being staff opens the admin; Django's per-model permissions are not consulted for these models,
  so there is one rule, not two.
- **Every write goes through the actions the other surfaces use** (forget, restore, edit, merge,
  settle, undo, answer, lift…), so the change log, the document, the gate and the timeline stay
  true. Fields only those actions may change are read-only in forms, and a form saves only the
  fields that changed. An action checks the person's permission in every memory its rows belong
  to before it touches any of them: all or nothing. One done to each chosen row is a method
  decorated with ``on_each_row``, which says that permission once.
- **Layers**: an admin class whose actions live in a higher app is registered from that app,
  never here — Fact and Conflict from ``memory/admin.py`` (``memory.actions`` edits, forgets,
  restores and settles), Subject from ``review/admin.py`` (a merge moves rules, findings and
  guesses too), Episode and Procedure from ``agent/admin.py``. This module registers what needs
  nothing above it: Memory, Membership, Source and Observation.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import ActionLocation
from django.core.exceptions import ValidationError
from django.db import models
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from brain import htmx
from brain.errors import StateConflict
from brain.words import clauses, counted
from knowledge import access, labeller, labelling, visibility
from knowledge.access import NotPermitted, Permission
from knowledge.models import (
    CompileRun,
    Fact,
    Label,
    LabellingRule,
    Membership,
    Memory,
    Observation,
    PageType,
    Passage,
    ReviewItem,
    Role,
    Source,
)
from knowledge.read_layer import ReadQuerySet

#: Where an action shows: above the list, and on the row's own page.
EVERYWHERE = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]
#: Columns no form shows: vectors and derived text are for search, not for reading.
NEVER_SHOWN = ("embedding", "search_vector", "normalized")


def granted(request: HttpRequest) -> dict[int, Permission]:
    """The person's permission in every memory, asked of ``knowledge.access`` once a request."""
    cached = getattr(request, "_granted_in_memories", None)
    if cached is None:
        cached = {m.pk: access.permission_of(request.user, m) for m in Memory.objects.all()}
        request._granted_in_memories = cached  # type: ignore[attr-defined]  # this request's, read above
    return cached


def memories_where(request: HttpRequest, needed: Permission) -> list[int] | None:
    """The ids of the memories where the person holds ``needed``; None for every memory (a
    superuser, without a query)."""
    if request.user.is_active and request.user.is_superuser:
        return None
    return [pk for pk, has in granted(request).items() if has >= needed]


def holds_somewhere(request: HttpRequest, needed: Permission) -> bool:
    ids = memories_where(request, needed)
    return ids is None or bool(ids)


class InMemoryFilter(admin.SimpleListFilter):
    """By memory, offering only the memories the person may read (``in_memory``: the address's
    ``memory`` names the one current memory of the other pages)."""

    title = "memory"
    parameter_name = "in_memory"

    def __init__(self, request, params, model, model_admin):
        self.memory_field = model_admin.memory_field
        super().__init__(request, params, model, model_admin)

    def lookups(self, request, model_admin):
        ids = memories_where(request, Permission.READ)
        memories = Memory.objects.order_by("name")
        if ids is not None:
            memories = memories.filter(pk__in=ids)
        return [(str(pk), name) for pk, name in memories.values_list("pk", "name")]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(**{self.memory_field: int(value)})
        return queryset


def on_each_row[Row](
    needed: Permission, description: str, *, location: list[ActionLocation] = EVERYWHERE
) -> Callable[[Callable[[Any, HttpRequest, Row], str]], Callable]:
    """A ``MemoryScopedAdmin`` action that does one thing to each chosen row: the method it
    decorates, ``(self, request, row) -> str``, does it through an app's action and says what
    happened, in words. ``needed`` is said once: it shows the action to those who hold it in
    some memory (``has_<needed>_permission``), and it is required in every memory of the rows
    before any is touched (``MemoryScopedAdmin.act``)."""

    def decorate(do: Callable[[Any, HttpRequest, Row], str]) -> Callable:
        @admin.action(permissions=[needed.label], description=description, location=location)
        @functools.wraps(do)
        def action(model_admin: MemoryScopedAdmin, request: HttpRequest, queryset) -> None:
            model_admin.act(request, queryset, needed, lambda row: do(model_admin, request, row))

        return action

    return decorate


class MemoryScopedAdmin(admin.ModelAdmin):
    """One memory's rows, for the people ``knowledge.access`` lets see them.

    ``memory_field``: the lookup from a row to its memory. ``change_needs``: what changing a row
    takes. ``editable``: the fields a form may change (everything else is read-only; most models
    change only through actions, so most have none). An action refused because of the state
    things are in (``brain.errors.StateConflict``) or bad input (``ValidationError``) is shown
    as an error message, as every surface says it.
    """

    memory_field = "memory"
    change_needs = Permission.CURATE
    editable: tuple[str, ...] = ()
    list_per_page = 50
    show_full_result_count = False  # one count query, not two

    # Rows and permissions --------------------------------------------------------------------

    def get_queryset(self, request):
        queryset = readable(super().get_queryset(request), request)
        ids = memories_where(request, Permission.READ)
        return queryset if ids is None else queryset.filter(**{f"{self.memory_field}__in": ids})

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            _hide_unreadable_relations(obj, request, keep=self.editable)
        return obj

    def memory_id_of(self, obj) -> int:
        """The memory ``obj`` belongs to, following ``memory_field`` without a query."""
        *path, last = self.memory_field.split("__")
        for step in path:
            obj = getattr(obj, step)
        return obj.pk if last == "pk" else getattr(obj, f"{last}_id")

    def may(self, request, obj, needed: Permission) -> bool:
        ids = memories_where(request, needed)
        return ids is None or self.memory_id_of(obj) in ids

    def has_module_permission(self, request) -> bool:
        return holds_somewhere(request, Permission.READ)

    def has_view_permission(self, request, obj=None) -> bool:
        if obj is None:
            return holds_somewhere(request, Permission.READ)
        return self.may(request, obj, Permission.READ)

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is None:
            return holds_somewhere(request, self.change_needs)
        return self.may(request, obj, self.change_needs)

    def has_add_permission(self, request) -> bool:
        return False  # rows come from the actions (teaching, passes, checks), not from forms

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # nothing is deleted in the ordinary course: statuses change instead

    # Action visibility: ``@admin.action(permissions=["curate"])`` asks these.
    def has_teach_permission(self, request) -> bool:
        return holds_somewhere(request, Permission.TEACH)

    def has_curate_permission(self, request) -> bool:
        return holds_somewhere(request, Permission.CURATE)

    def has_administer_permission(self, request) -> bool:
        return holds_somewhere(request, Permission.ADMINISTER)

    def get_list_filter(self, request):
        return [*self.list_filter, InMemoryFilter]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        """A choice of rows that carry labels offers only those the person may read."""
        if "queryset" not in kwargs and _reads_labelled(db_field.related_model):
            kwargs["queryset"] = db_field.related_model._default_manager.readable_by(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if "queryset" not in kwargs and _reads_labelled(db_field.related_model):
            kwargs["queryset"] = db_field.related_model._default_manager.readable_by(request.user)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    # Forms -----------------------------------------------------------------------------------

    def get_fields(self, request, obj=None):
        if self.fields:
            return self.fields
        meta = self.model._meta
        shown = [*meta.concrete_fields, *meta.many_to_many]
        return [f.name for f in shown if not f.primary_key and f.name not in NEVER_SHOWN]

    def get_readonly_fields(self, request, obj=None):
        may_change = obj is None or self.may(request, obj, self.change_needs)
        editable = self.editable if may_change else ()
        shown = [name for name in self.get_fields(request, obj) if name not in editable]
        return [*shown, *(name for name in self.readonly_fields if name not in shown)]

    def save_model(self, request, obj, form, change) -> None:
        """Only what the form changed is written (``update_fields``); nothing when nothing did."""
        if not change:
            obj.save()
            return
        changed = [
            name
            for name in form.changed_data
            if isinstance(self.model._meta.get_field(name), models.Field)
            and not self.model._meta.get_field(name).many_to_many
        ]
        if changed:
            obj.save(update_fields=changed)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """An action sent from a row's own page runs outside the admin's request-wide
        transaction: actions open their own (and retry a lost lock race), and none may hold one
        across a model call."""
        if request.method == "POST" and f"{ActionLocation.CHANGE_FORM.value}-action" in (
            request.POST
        ):
            # private ModelAdmin API (changeform_view without its transaction), not in django-stubs
            return self._changeform_view(request, object_id, form_url, extra_context)  # type: ignore[attr-defined]
        return super().changeform_view(request, object_id, form_url, extra_context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        # A page with nothing to save offers no Save buttons (its actions are above them).
        if obj is not None and not set(self.editable) - set(context["adminform"].readonly_fields):
            context.update(show_save=False, show_save_and_continue=False)
            context.update(show_save_and_add_another=False, show_delete=False)
        return super().render_change_form(request, context, add, change, form_url, obj)

    # Actions ---------------------------------------------------------------------------------

    def permitted(self, request, rows: list, needed: Permission) -> bool:
        """Whether the person holds ``needed`` in every memory ``rows`` belong to; if not, an
        error message naming what is missing."""
        try:
            for memory in Memory.objects.filter(pk__in={self.memory_id_of(r) for r in rows}):
                access.require(request.user, memory, needed)
        except NotPermitted as refusal:
            self.message_user(request, f"{refusal} Nothing was changed.", messages.ERROR)
            return False
        return True

    def act[Row](
        self, request, rows: Iterable[Row], needed: Permission, do: Callable[[Row], str]
    ) -> None:
        """Run ``do(row)`` (an action of the app; returns what happened, in words) for each row,
        once the person may do ``needed`` in every memory of the rows; say what happened,
        grouping the same words. A refusal is an error message, and nothing after it runs."""
        rows = list(rows)
        if not self.permitted(request, rows, needed):
            return
        said: Counter[str] = Counter()
        try:
            for row in rows:
                said[do(row)] += 1
        except (ValidationError, StateConflict) as refusal:
            self._refused(request, refusal)
        for words, times in said.items():
            self.message_user(request, words if times == 1 else f"{words} (×{times})")

    def act_once(
        self, request, rows: Iterable, needed: Permission, do: Callable[[list], str]
    ) -> None:
        """``act`` for an action that takes every row at once."""
        rows = list(rows)
        if not self.permitted(request, rows, needed):
            return
        try:
            self.message_user(request, do(rows))
        except (ValidationError, StateConflict) as refusal:
            self._refused(request, refusal)

    def _refused(self, request, refusal: ValidationError | StateConflict) -> None:
        self.message_user(request, htmx.reason(refusal), messages.ERROR)


def readable(queryset, request):
    """``queryset`` as the person may read it: a ``ReadQuerySet`` through the read rule, any
    other as it is (its rows carry no labels)."""
    if isinstance(queryset, ReadQuerySet):
        return queryset.readable_by(request.user)
    return queryset


def _reads_labelled(model) -> bool:
    return isinstance(model._default_manager.all(), ReadQuerySet)


def _hide_unreadable_relations(obj, request, *, keep=()) -> None:
    """Blank, on this shown copy of ``obj``, each row it points to that the person may not read
    (a fact's successor, an item's fact): the page shows "—" instead of its words. Fields a
    form may change (``keep``) are left alone, so a save never writes the blank."""
    for field in obj._meta.concrete_fields:
        target = getattr(field, "related_model", None)
        if not field.is_relation or field.name in keep or target is None:
            continue
        value = getattr(obj, field.attname)
        if value is None or not _reads_labelled(target):
            continue
        if not target._default_manager.readable_by(request.user).filter(pk=value).exists():
            setattr(obj, field.name, None)


class RunLogAdmin(MemoryScopedAdmin):
    """The log of a background run (a compile, a reflection, a study session, an insight run, a
    deep review): what it read, filed and left out, in the words of what it read, so only
    those who administer its memory — who read all of it — see it. Written only by the run;
    nothing here is changed or added."""

    change_needs = Permission.ADMINISTER

    def get_queryset(self, request):
        ids = memories_where(request, Permission.ADMINISTER)
        runs = super().get_queryset(request)
        return runs if ids is None else runs.filter(memory__in=ids)

    # A run of a memory they do not administer is not in their list (get_queryset), so asked
    # for by id it is not found, as a missing one is: never a "not allowed".
    def has_module_permission(self, request) -> bool:
        return holds_somewhere(request, Permission.ADMINISTER)


class ReadOnlyInline(admin.TabularInline):
    """Children shown with their parent, never edited there (the parent's page has already
    checked that the person may read it); only the children they may read, and every field
    it shows (``fields``) read-only."""

    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        return readable(super().get_queryset(request), request)

    def get_readonly_fields(self, request, obj=None):
        return self.fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_staff


def link_to(obj, label: str | None = None) -> str:
    """A link to ``obj``'s admin page."""
    if obj is None:
        return "—"
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


# Memories and who may do what in them ---------------------------------------------------------


class MembershipInline(admin.TabularInline):
    """Who may do what in this memory (the rule: knowledge/access.py). Superusers administer
    every memory without a row; a person without a row gets BRAIN_DEFAULT_PERMISSION."""

    model = Membership
    extra = 1

    def get_autocomplete_fields(self, request):
        # Searching people needs the user admin, which only superusers see.
        return ["user"] if request.user.is_superuser else []

    def _administers(self, request, memory) -> bool:
        return memory is not None and access.may(request.user, memory, Permission.ADMINISTER)

    def has_view_permission(self, request, obj=None) -> bool:
        return obj is None or access.may(request.user, obj, Permission.READ)

    def has_add_permission(self, request, obj=None) -> bool:
        return self._administers(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._administers(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._administers(request, obj)


@admin.register(Memory)
class MemoryAdmin(MemoryScopedAdmin):
    """A memory's settings (learning, the size cap, injection, the core) and who may do what in
    it: both need administer. Memories are made here or with ``brain memories create``."""

    memory_field = "pk"
    change_needs = Permission.ADMINISTER
    list_display = ["name", "slug", "memory_max_kb", "learning", "memory_injection", "created_at"]
    list_filter = ["learning", "memory_injection"]
    search_fields = ["name", "slug"]
    fields = ["name", "slug", "memory_max_kb", "learning", "memory_injection", "core", "created_at"]
    editable = ("name", "slug", "memory_max_kb", "learning", "memory_injection", "core")
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def get_list_filter(self, request):
        return self.list_filter

    def has_add_permission(self, request) -> bool:
        # A new memory has no grants yet: only someone who administers every memory makes one.
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser


class SchemaAdmin(MemoryScopedAdmin):
    """Rows that decide who may do or read what, or what a memory keeps: administer in their
    memory adds, changes and removes them (a grant decides what its person may do, a label who
    reads every passage it is on)."""

    change_needs = Permission.ADMINISTER

    def has_add_permission(self, request) -> bool:
        return self.has_administer_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self.has_change_permission(request, obj)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:  # a new row: everything is chosen here
            return [name for name in self.readonly_fields]
        return super().get_readonly_fields(request, obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "memory":
            ids = memories_where(request, Permission.ADMINISTER)
            if ids is not None:
                kwargs["queryset"] = Memory.objects.filter(pk__in=ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Membership)
class MembershipAdmin(SchemaAdmin):
    """Every grant in one list: administer in a memory is needed to add, change or remove one."""

    list_display = ["user", "memory", "permission"]
    list_filter = ["permission"]
    list_select_related = ["user", "memory"]
    search_fields = ["user__username", "memory__name"]
    fields = ["memory", "user", "permission"]
    editable = ("permission",)

    def get_autocomplete_fields(self, request):
        return ["user"] if request.user.is_superuser else []


# Where things were learned, and every time something was said ----------------------------------


@admin.register(Source)
class SourceAdmin(MemoryScopedAdmin):
    """Where facts came from; never edited."""

    list_display = ["title", "kind", "reference", "facts", "memory", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["memory"]
    search_fields = ["title", "reference", "text"]
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        # A source is listed for a person who reads one of its passages (visibility.py); its
        # text shows them only those (``text_for``).
        return super().get_queryset(request).annotate(fact_count=models.Count("facts"))

    def get_object(self, request, object_id, from_field=None):
        source = super().get_object(request, object_id, from_field)
        if source is not None:  # shown, never saved (a source is never edited)
            source.text = visibility.masked_text(source, request.user)
        return source

    def get_search_results(self, request, queryset, search_term):
        # Words are looked for in the passages the person may read, never in masked text.
        words = search_term.strip()
        if not words:
            return queryset, False
        readable = Passage.objects.readable_by(request.user).filter(text__icontains=words)
        found = queryset.filter(
            models.Q(title__icontains=words)
            | models.Q(reference__icontains=words)
            | models.Q(pk__in=readable.values("source_id"))
        )
        return found, False

    @admin.display(description="facts", ordering="fact_count")
    def facts(self, source: Source) -> str:
        url = reverse("admin:knowledge_fact_changelist") + f"?source__id__exact={source.pk}"
        return format_html('<a href="{}">{}</a>', url, source.fact_count)  # type: ignore[attr-defined]  # annotated by get_queryset()


@admin.register(Observation)
class ObservationAdmin(MemoryScopedAdmin):
    """Every time a fact was said: who, when, through what, with what outcome. Never edited."""

    memory_field = "fact__memory"
    list_display = ["text", "fact_link", "kind", "said_by_name", "channel", "outcome", "created_at"]
    list_filter = ["kind", "channel", "outcome"]
    list_select_related = ["fact"]
    search_fields = ["text", "said_by_name", "fact__text"]
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        observations = super().get_queryset(request)  # the fact and the source they read
        return observations.defer("fact__embedding", "fact__search_vector")

    @admin.display(description="fact", ordering="fact")
    def fact_link(self, observation: Observation) -> str:
        return link_to(observation.fact, f"#{observation.fact_id}")


class ObservationInline(ReadOnlyInline):
    """A fact's observations: each time it was said, and the outcome reported with it."""

    model = Observation
    fk_name = "fact"
    fields = ["kind", "text", "said_by_name", "channel", "outcome", "episode", "created_at"]


class FactSubjectInline(ReadOnlyInline):
    """What a fact is about (set from its words and what it was taught with)."""

    model = Fact.subjects.through
    fields = ["subject"]
    verbose_name = "subject"
    verbose_name_plural = "subjects"
    show_change_link = False


# Who reads what: labels, roles, passages, and the schema (knowledge/visibility.py) ------------


@admin.register(Label)
class LabelAdmin(SchemaAdmin):
    """A label's name and written meaning. Deleting one that passages or sources still carry
    is refused, naming where (``labelling.delete_label``)."""

    list_display = ["name", "meaning", "default", "passage_count", "memory"]
    list_filter = ["default"]
    list_select_related = ["memory"]
    search_fields = ["name", "meaning"]
    fields = ["memory", "name", "meaning", "default"]
    editable = ("name", "meaning", "default")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(passage_total=models.Count("passages"))

    @admin.display(description="passages", ordering="passage_total")
    def passage_count(self, label: Label) -> int:
        return label.passage_total  # type: ignore[attr-defined]  # annotated by get_queryset()

    def save_model(self, request, obj, form, change) -> None:
        """A new label, or a changed meaning, relabels the memory's passages (those a person
        decided are left as they chose); facts follow their passages, nothing is compiled."""
        super().save_model(request, obj, form, change)
        if not change or "meaning" in form.changed_data:
            looked = labeller.relabel(memory=obj.memory)
            self.message_user(
                request,
                f"Looked again at {counted(looked, 'passage')} with the "
                "labels' meanings as they are now; facts follow their passages at once.",
            )

    def delete_model(self, request, obj) -> None:
        self.delete_queryset(request, [obj])

    def delete_queryset(self, request, queryset) -> None:
        try:
            for label in queryset:
                labelling.delete_label(label)
        except StateConflict as refusal:
            self.message_user(request, str(refusal), messages.ERROR)

    def response_delete(self, request, obj_display, obj_id):
        if Label.objects.filter(pk=obj_id).exists():  # refused: back to it, with the reason
            return HttpResponseRedirect(reverse("admin:knowledge_label_change", args=[obj_id]))
        return super().response_delete(request, obj_display, obj_id)


class GrantsLabelsAdmin(SchemaAdmin):
    """A row that names labels (a role grants them, a rule sets them): it is offered the labels
    of the memories the person administers, and keeps only those of its own memory."""

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "labels":
            ids = memories_where(request, Permission.ADMINISTER)
            if ids is not None:
                kwargs["queryset"] = Label.objects.filter(memory__in=ids)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        row = form.instance
        stray = row.labels.exclude(memory=row.memory_id)
        if stray.exists():
            row.labels.remove(*stray)
            named = self.model._meta.verbose_name
            self.message_user(
                request,
                f"Labels of another memory were left out of this {named}.",
                messages.WARNING,
            )


@admin.register(Role)
class RoleAdmin(GrantsLabelsAdmin):
    """The labels a person may read, and who holds the role (a role for everyone is held by
    every person who may read the memory)."""

    list_display = ["name", "granted", "everyone", "member_count", "memory"]
    list_filter = ["everyone"]
    list_select_related = ["memory"]
    search_fields = ["name", "members__username", "labels__name"]
    fields = ["memory", "name", "labels", "everyone", "members"]
    editable = ("name", "labels", "everyone", "members")
    filter_horizontal = ["labels", "members"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels", "members")

    @admin.display(description="labels it grants")
    def granted(self, role: Role) -> str:
        return ", ".join(label.name for label in role.labels.all()) or "—"

    @admin.display(description="people")
    def member_count(self, role: Role) -> str:
        return "everyone" if role.everyone else str(len(role.members.all()))


@admin.register(LabellingRule)
class LabellingRuleAdmin(GrantsLabelsAdmin):
    """Rules that label a memory's new sources by sender, channel, title words or page
    (``knowledge.labelling_rules``): a source that matches every condition a rule gives takes
    its labels as if a person had set them, and relabelling keeps them."""

    list_display = ["name", "conditions", "label_names", "memory"]
    list_select_related = ["memory", "page"]
    search_fields = ["name", "sender", "title_words", "labels__name"]
    fields = ["memory", "name", "labels", "sender", "channel", "title_words", "page"]
    editable = ("name", "labels", "sender", "channel", "title_words", "page")
    filter_horizontal = ["labels"]
    autocomplete_fields = ["page"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels")

    @admin.display(description="labels it sets")
    def label_names(self, rule: LabellingRule) -> str:
        return ", ".join(label.name for label in rule.labels.all()) or "—"

    @admin.display(description="a new source that")
    def conditions(self, rule: LabellingRule) -> str:
        said = clauses(
            (rule.sender, f"was sent or added by {rule.sender}"),
            (rule.channel, f"is a {rule.get_channel_display()}"),
            (rule.title_words, f"has “{rule.title_words}” in its title"),
            (rule.page, f"names {rule.page}"),
        )
        return "; ".join(said) or "—"


@admin.register(PageType)
class PageTypeAdmin(SchemaAdmin):
    """The page types a memory keeps, with written guidance on what belongs on each."""

    list_display = ["name", "key", "guidance", "memory"]
    list_select_related = ["memory"]
    search_fields = ["name", "guidance"]
    fields = ["memory", "key", "name", "guidance"]
    editable = ("name", "guidance")


@admin.register(Passage)
class PassageAdmin(MemoryScopedAdmin):
    """Passages with their labels; a person reading this list sees only the passages they may
    read (administrators, all). Relabelled through ``labelling``: facts follow at once."""

    list_display = ["short_text", "source_link", "ordinal", "label_names", "unsure", "memory"]
    list_filter = ["unsure", "labels"]
    list_select_related = ["source", "memory"]
    search_fields = ["text", "source__title"]
    fields = ["memory", "source", "ordinal", "text", "label_names", "unsure", "created_at"]
    readonly_fields = ["label_names"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels").defer("search_vector")

    @admin.display(description="text")
    def short_text(self, passage: Passage) -> str:
        return passage.text[:120]

    @admin.display(description="source", ordering="source__title")
    def source_link(self, passage: Passage) -> str:
        return link_to(passage.source)

    @admin.display(description="labels")
    def label_names(self, passage: Passage) -> str:
        return ", ".join(label.name for label in passage.labels.all()) or "none (administrators)"


@admin.register(ReviewItem)
class ReviewItemAdmin(MemoryScopedAdmin):
    """Where brain asks: the labeller's doubts about a source's passages. Administrators read
    them (a doubt may quote a passage); settle one once its passages' labels are chosen (on the
    source's page, or under Passages)."""

    change_needs = Permission.ADMINISTER
    list_display = ["question", "kind", "source_link", "state", "created_at", "memory"]
    list_filter = ["state", "kind"]
    list_select_related = ["source", "memory"]
    search_fields = ["question", "source__title"]
    date_hierarchy = "created_at"
    actions = ["settle"]

    def get_queryset(self, request):
        ids = memories_where(request, Permission.ADMINISTER)
        items = super().get_queryset(request)
        return items if ids is None else items.filter(memory__in=ids)

    @admin.display(description="source", ordering="source__title")
    def source_link(self, item: ReviewItem) -> str:
        if item.source is None:
            return "—"
        url = reverse("knowledge:source", args=[item.source_id])
        return format_html('<a href="{}">{}</a>', url, item.source.title)

    @on_each_row(Permission.ADMINISTER, "Mark as settled", location=[ActionLocation.CHANGE_LIST])
    def settle(self, request, item: ReviewItem) -> str:
        if item.kind == ReviewItem.Kind.CONFLICT:  # its conflict would stay open
            raise StateConflict(
                "A conflict is settled by choosing what holds: in Review, on its page or "
                "under Conflicts."
            )
        labeller.settle(item, by=request.user)
        return "Settled."


@admin.register(CompileRun)
class CompileRunAdmin(RunLogAdmin):
    """Each compile of a note, document or email into facts on pages: how far it got, what it
    filed, what it left out and why (memory/compiling.py writes it; Compile again is on the
    source's page). Administrators read them: what a run read holds the words of every passage."""

    change_needs = Permission.ADMINISTER
    list_display = [
        "pk",
        "source_link",
        "state",
        "compiler",
        "passages_done",
        "passages_total",
        "facts_filed",
        "facts_known",
        "unplaced",
        "started_at",
        "memory",
    ]
    list_filter = ["state", "compiler"]
    list_select_related = ["source", "memory"]
    search_fields = ["reason", "source__title"]
    date_hierarchy = "started_at"
    fields = [
        "memory",
        "source",
        "requested_by",
        "state",
        "reason",
        "compiler",
        "passages_total",
        "passages_done",
        "facts_filed",
        "facts_known",
        "unplaced",
        "notes",
        "statements",
        "started_at",
        "claimed_at",
        "executor",
        "lease_expires_at",
        "finished_at",
    ]

    @admin.display(description="source", ordering="source__title")
    def source_link(self, run: CompileRun) -> str:
        return link_to(run.source)
