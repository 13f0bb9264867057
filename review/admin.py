"""What waits on a person, in the admin — and subjects, which are knowledge's model but are
registered here because merging two moves this app's rows too (rules, findings, guesses,
judgements: ``review.merging``), and a lower app never imports a higher one.

Findings are settled, rules lifted and guesses answered only through ``review.findings`` and
``review.guesses``, as on the Findings tab, so the timeline and the judgements stay true. The
rules every admin class follows: ``knowledge/admin.py``.
"""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, Q
from django.template.response import TemplateResponse

from knowledge import actions as knowledge_actions
from knowledge.access import Permission
from knowledge.admin import (
    MemoryScopedAdmin,
    ReadOnlyInline,
    RunLogAdmin,
    link_to,
    memories_where,
    on_each_row,
)
from knowledge.models import Fact, Subject
from review import findings as review_findings
from review import guesses as review_guesses
from review import merging
from review.models import (
    DeepReview,
    Event,
    Finding,
    Guess,
    HouseEvent,
    InsightRun,
    Judgement,
    Rule,
)

# Subjects ------------------------------------------------------------------------------------


class SubjectForm(forms.ModelForm):
    class Meta:
        model = Subject
        fields = ["name", "kind", "entity_id", "room", "aliases"]

    def clean_aliases(self) -> list[str]:
        """Nicknames are kept lower-cased, once each, as every lookup expects them."""
        nicknames = (alias.strip().casefold() for alias in self.cleaned_data.get("aliases") or [])
        return list(dict.fromkeys(n for n in nicknames if n))


@admin.register(Subject)
class SubjectAdmin(MemoryScopedAdmin):
    """The house, its rooms, devices and people; found by name, nickname or entity id. Names,
    nicknames, entity ids and rooms are edited in the form; merging and presence go through
    their actions so facts, nicknames and rules follow."""

    form = SubjectForm
    # "facts_read", not "facts": the admin would show the reverse relation of that name.
    list_display = [
        "name",
        "kind",
        "entity_id",
        "nicknames",
        "room",
        "present",
        "facts_read",
        "memory",
    ]
    list_filter = ["kind", "present"]
    list_select_related = ["room", "memory"]
    search_fields = ["name", "entity_id", "aliases"]
    search_help_text = "A name, nickname or entity id."
    fields = [
        "memory",
        "kind",
        "name",
        "aliases",
        "entity_id",
        "room",
        "present",
        "removed_at",
        "created_at",
    ]
    editable = ("kind", "name", "aliases", "entity_id", "room")
    actions = ["merge", "gone", "back"]

    def get_queryset(self, request):
        """For anyone but a superuser, only the pages that exist for them (the read rule: a
        page with a fact they read) — and every subject of a memory they administer, since its
        administrators read all of it, a room with no fact yet included."""
        subjects = super().get_queryset(request)  # the read rule: SubjectQuerySet._narrow
        if memories_where(request, Permission.ADMINISTER) is None:
            return subjects.annotate(fact_count=Count("facts"))
        # The facts column counts what they read, never what is kept from them.
        facts = Fact.objects.readable_by(request.user).values("pk")
        return subjects.annotate(fact_count=Count("facts", filter=Q(facts__in=facts)))

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is not None and "room" in form.base_fields:
            rooms = Subject.objects.as_system("the rooms a person may file a subject in").filter(
                memory=obj.memory_id, kind=Subject.Kind.ROOM
            )
            room = cast(forms.ModelChoiceField, form.base_fields["room"])  # a foreign key's field
            room.queryset = rooms.exclude(pk=obj.pk)
        return form

    @admin.display(description="nicknames")
    def nicknames(self, subject: Subject) -> str:
        return ", ".join(subject.aliases) or "—"

    @admin.display(description="facts", ordering="fact_count")
    def facts_read(self, subject: Subject) -> int:
        return subject.fact_count  # type: ignore[attr-defined]  # annotated by get_queryset()

    @admin.action(permissions=["curate"], description="Merge into one")
    def merge(self, request, queryset):
        """Two or more subjects that are one thing: the person picks the one to keep, and the
        others are merged into it, one by one (``review.merging.merge_subjects``)."""
        subjects = list(queryset.order_by("name", "pk"))
        if len(subjects) < 2:
            self.message_user(request, "Choose two subjects or more to merge.", messages.WARNING)
            return None
        if not self.permitted(request, subjects, Permission.CURATE):
            return None
        keep = next((s for s in subjects if str(s.pk) == request.POST.get("keep")), None)
        if keep is None:
            return TemplateResponse(
                request,
                "admin/knowledge/subject/merge.html",
                {
                    **self.admin_site.each_context(request),
                    "title": "Merge subjects",
                    "opts": self.opts,
                    "subjects": subjects,
                    "action": "merge",
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                },
            )
        self.act(
            request,
            [s for s in subjects if s.pk != keep.pk],
            Permission.CURATE,
            lambda merged: merging.merge_subjects(keep=keep, merged=merged).message,
        )
        return None

    @on_each_row(Permission.CURATE, "The house no longer has it")
    def gone(self, request, subject: Subject) -> str:
        knowledge_actions.set_subject_presence(subject=subject, present=False)
        return f"“{subject.name}” is gone: its facts rest until it is back."

    @on_each_row(Permission.CURATE, "It is back")
    def back(self, request, subject: Subject) -> str:
        knowledge_actions.set_subject_presence(subject=subject, present=True)
        return f"“{subject.name}” is back, and so are its facts."


# Findings and the rules they leave -------------------------------------------------------------


class RuleInline(ReadOnlyInline):
    model = Rule
    fk_name = "finding"
    fields = ["check_id", "scope", "until", "reason", "removed_at", "created_at"]


@admin.register(Finding)
class FindingAdmin(MemoryScopedAdmin):
    list_display = [
        "text",
        "check_id",
        "subject",
        "severity",
        "state",
        "times_raised",
        "last_raised_at",
        "memory",
    ]
    list_filter = ["state", "severity", "is_todo", "protected"]
    list_select_related = ["subject", "memory"]
    search_fields = ["text", "check_id", "entity_id", "subject__name", "subject__aliases"]
    date_hierarchy = "last_raised_at"
    inlines = [RuleInline]
    actions = ["fixed", "not_a_problem"]

    @on_each_row(Permission.CURATE, "I've already fixed it")
    def fixed(self, request, finding: Finding) -> str:
        review_findings.mark_fixed(finding=finding, by=request.user)
        return f"“{finding.text}”: quiet while it stays fixed."

    @on_each_row(Permission.CURATE, "Not a problem on this sensor")
    def not_a_problem(self, request, finding: Finding) -> str:
        rule = review_findings.not_a_problem(finding=finding, by=request.user)
        return f"“{finding.text}”: {rule.describe()}."


class ActiveFilter(admin.SimpleListFilter):
    title = "in force"
    parameter_name = "in_force"

    def lookups(self, request, model_admin):
        return [("yes", "in force"), ("no", "lifted or run out")]

    def queryset(self, request, queryset):
        active = Rule.objects.active().values("pk")
        if self.value() == "yes":
            return queryset.filter(pk__in=active)
        if self.value() == "no":
            return queryset.exclude(pk__in=active)
        return queryset


@admin.register(Rule)
class RuleAdmin(MemoryScopedAdmin):
    """Rules are made by "Not a problem" and lifted only through ``remove_rule``."""

    list_display = ["described", "scope", "origin", "reason", "removed_at", "created_at", "memory"]
    list_filter = [ActiveFilter, "scope", "origin"]
    list_select_related = ["subject", "room", "memory"]
    search_fields = ["check_id", "entity_id", "reason", "subject__name", "subject__aliases"]
    date_hierarchy = "created_at"
    actions = ["lift"]

    @admin.display(description="rule")
    def described(self, rule: Rule) -> str:
        return rule.describe()

    @on_each_row(Permission.CURATE, "Lift: let the check raise it again")
    def lift(self, request, rule: Rule) -> str:
        review_findings.remove_rule(rule=rule, by=request.user)
        return f"Lifted: {rule.describe().removeprefix('Not raised: ')} may be raised again."


# Guesses ------------------------------------------------------------------------------------


@admin.register(Guess)
class GuessAdmin(MemoryScopedAdmin):
    """A guess and its answer (who, when, why); answered only through ``answer_guess`` — which
    takes teach, as on the Findings tab."""

    list_display = ["question", "subject", "why", "state", "offered_at", "answered_by", "memory"]
    list_filter = ["state"]
    list_select_related = ["subject", "answered_by", "memory"]
    search_fields = ["text", "why", "subject__name", "subject__aliases"]
    date_hierarchy = "created_at"
    fields = [
        "memory",
        "text",
        "why",
        "subject",
        "state",
        "created_at",
        "offered_at",
        "expires_at",
        "slept_at",
        "answered_at",
        "answered_by",
        "reason",
        "fact",
    ]
    actions = ["confirm", "reject", "dismiss"]

    @staticmethod
    def _answer(request, guess: Guess, answer: str) -> str:
        answered = review_guesses.answer_guess(guess=guess, answer=answer, by=request.user)
        return f"“{guess.text}”: {answered.message}"

    @on_each_row(Permission.TEACH, "Yes, that's right")
    def confirm(self, request, guess: Guess) -> str:
        return self._answer(request, guess, "yes")

    @on_each_row(Permission.TEACH, "No")
    def reject(self, request, guess: Guess) -> str:
        return self._answer(request, guess, "no")

    @on_each_row(Permission.TEACH, "Not now")
    def dismiss(self, request, guess: Guess) -> str:
        review_guesses.dismiss_guess(guess=guess, by=request.user)
        return f"“{guess.text}”: put away for now; it comes back later."


# The timeline and brain's own arithmetic -------------------------------------------------------


@admin.register(Event)
class EventAdmin(MemoryScopedAdmin):
    list_display = ["created_at", "kind", "text", "pushed_at", "memory"]
    list_filter = ["kind"]
    list_select_related = ["memory"]
    search_fields = ["text"]
    date_hierarchy = "created_at"


@admin.register(Judgement)
class JudgementAdmin(MemoryScopedAdmin):
    list_display = ["check_id", "subject", "raised", "marked_not_a_problem", "fact_link"]
    list_select_related = ["subject", "fact", "memory"]
    search_fields = ["check_id", "subject__name", "subject__aliases"]
    date_hierarchy = "renewed_at"

    def get_queryset(self, request):
        return super().get_queryset(request).defer("fact__embedding", "fact__search_vector")

    @admin.display(description="fact")
    def fact_link(self, judgement: Judgement) -> str:
        return link_to(judgement.fact)


@admin.register(DeepReview)
class DeepReviewAdmin(RunLogAdmin):
    list_display = ["pk", "state", "requested_by", "started_at", "finished_at", "memory"]
    list_filter = ["state"]
    list_select_related = ["requested_by", "memory"]
    search_fields = ["report"]
    date_hierarchy = "started_at"


@admin.register(InsightRun)
class InsightRunAdmin(RunLogAdmin):
    """Each daily insight run: the house events it read, the guesses it opened and what it
    filed (review/insight.py writes it)."""

    list_display = ["pk", "state", "events_read", "started_at", "finished_at", "memory"]
    list_filter = ["state"]
    list_select_related = ["memory"]
    search_fields = ["report"]
    date_hierarchy = "started_at"


@admin.register(HouseEvent)
class HouseEventAdmin(MemoryScopedAdmin):
    """What the house reported (a device turned on by hand, by an automation…), kept 60 days
    for the insight runs (review/house_events.py). Never edited."""

    list_display = ["at", "entity_id", "state", "from_state", "cause", "who", "memory"]
    list_filter = ["cause"]
    list_select_related = ["memory"]
    search_fields = ["entity_id", "state", "who"]
    date_hierarchy = "at"
