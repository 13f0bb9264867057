"""The Findings tab: one list of what waits on a decision (high-stakes problems, then the open
guesses, then the rest), the rules a person set, and the timeline.

Every action is a plain form that redirects back with a message; with htmx it swaps the list
(the card leaves, a newly offered guess arrives), shows a toast and sends ``findingsChanged`` so
the nav badge and Rules you set re-read themselves. A wide rule (the room, everywhere) is asked
about before it is made; a form a person filled in wrong comes back with their text kept.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from brain import htmx
from brain.htmx import Toast
from brain.inputs import BadInput
from knowledge import access
from knowledge.models import Memory, Permission, Subject
from review import check_names, counts, deep_review
from review import findings as review_findings
from review import guesses as review_guesses
from review import timeline as review_timeline
from review.forms import UNTIL, AnswerGuessForm, MarkFixedForm, NotAProblemForm
from review.models import DeepReview, Event, Finding, Guess, Rule, Severity

PAGE = "review/findings.html"
CHANGED = "findingsChanged"
EVENTS_PER_PAGE = 50
WIDE = (Rule.Scope.ROOM, Rule.Scope.EVERYWHERE)
UNDO_FOR = timedelta(days=1)  # a rule this new offers Undo; an older one, Let brain raise it again
NOT_SENT_BY_THIS_PAGE = "That request wasn't one this page sends. Reload the page and try again."


def _cleaned(form: forms.Form) -> dict:
    """The form's cleaned data; BadInput when the post is not one this page's forms send."""
    if not form.is_valid():
        raise BadInput(NOT_SENT_BY_THIS_PAGE)
    return form.cleaned_data


def _finding(memory: Memory, pk: int) -> Finding:
    return get_object_or_404(Finding.objects.select_related("subject__room"), pk=pk, memory=memory)


def _guess(memory: Memory, pk: int) -> Guess:
    return get_object_or_404(Guess, pk=pk, memory=memory)


# Forms on the cards --------------------------------------------------------------------------


def _blank_finding_form() -> dict:
    return {"reason": "", "scope": Rule.Scope.SENSOR, "until": "good", "until_date": ""}


def _room_of(finding: Finding) -> Subject | None:
    subject = finding.subject
    if subject is None:
        return None
    if subject.room_id:
        return subject.room
    return subject if subject.kind == Subject.Kind.ROOM else None


def _scopes(finding: Finding) -> list[tuple[str, str]]:
    """How far a Not a problem may reach from this card: protected findings stop at the sensor,
    and "the room" is offered only when the finding is about something in a known room."""
    if finding.protected:
        return [(Rule.Scope.SENSOR.value, Rule.Scope.SENSOR.label)]
    return [
        (scope.value, scope.label)
        for scope in Rule.Scope
        if scope != Rule.Scope.ROOM or _room_of(finding) is not None
    ]


def _prepare(finding: Finding, form: dict | None = None) -> Finding:
    finding.form = {**_blank_finding_form(), **(form or {})}  # type: ignore[attr-defined]  # for the template
    finding.scopes = _scopes(finding)  # type: ignore[attr-defined]  # for the template
    return finding


def _prepare_guess(guess: Guess, form: dict | None = None) -> Guess:
    guess.form = {"reason": "", **(form or {})}  # type: ignore[attr-defined]  # for the template
    return guess


def _until(choice: str, day: str) -> str | datetime:
    """The "how long" radio as the action takes it; a date lasts until that day begins."""
    if choice != "date":
        return choice
    try:
        picked = date.fromisoformat(day.strip())
    except ValueError:
        raise ValidationError("Pick the date the rule should last until.") from None
    if picked <= timezone.localdate():
        raise ValidationError("Pick a date after today.")
    return timezone.make_aware(datetime.combine(picked, time.min))


def _question(finding: Finding, scope: str, until: str | datetime) -> str:
    """The confirmation step's question, in the words the rule will be listed with."""
    where = (
        f"anywhere in {_room_of(finding) or 'the room'}"
        if scope == Rule.Scope.ROOM
        else "anywhere in the house"
    )
    if isinstance(until, datetime):
        lasting = f"until {timezone.localtime(until):%-d %b %Y}"
    else:
        lasting = dict(UNTIL)[until]
    named = check_names.name_of(finding.check_id)
    return f"This stops “{named}” being raised {where}, {lasting} — make this rule?"


# Contexts, one per region ---------------------------------------------------------------------


def _list_context(
    memory: Memory,
    *,
    finding_forms: dict[int, dict] | None = None,
    guess_forms: dict[int, dict] | None = None,
) -> dict:
    """The one list. ``finding_forms``/``guess_forms`` put a card back with what was typed in it
    (an error, or the wide-rule question)."""
    finding_forms, guess_forms = finding_forms or {}, guess_forms or {}
    findings = [
        _prepare(finding, finding_forms.get(finding.pk))
        for finding in Finding.objects.for_memory(memory)
        .open()
        .in_review_order()
        .select_related("subject__room")
    ]
    guesses = [
        _prepare_guess(guess, guess_forms.get(guess.pk))
        for guess in Guess.objects.for_memory(memory)
        .open()
        .select_related("subject")
        .order_by("offered_at", "pk")
    ]
    return {
        "high": [f for f in findings if f.severity == Severity.HIGH],
        "guesses": guesses,
        "rest": [f for f in findings if f.severity != Severity.HIGH],
        "waiting_count": len(findings) + len(guesses),
        "until_choices": UNTIL,
        "min_date": (timezone.localdate() + timedelta(days=1)).isoformat(),
    }


def _rules_context(memory: Memory) -> dict:
    rules = (
        Rule.objects.for_memory(memory)
        .active()
        .select_related("subject", "room", "created_by")
        .order_by("-created_at", "-pk")
    )
    return {"rules": list(rules), "recent_since": timezone.now() - UNDO_FOR}


def _page(request: HttpRequest, memory: Memory) -> HttpResponse:
    context = {"memory": memory, **_list_context(memory), **_rules_context(memory)}
    return render(request, PAGE, context)


# Responses ------------------------------------------------------------------------------------


def _done(request: HttpRequest, memory: Memory, toast: Toast) -> HttpResponse:
    """The card is settled (by this person, or just now by someone else): it leaves the list."""
    return htmx.answer(
        request,
        f"{PAGE}#findings-list",
        _list_context(memory),
        back=reverse("review:findings"),
        event=CHANGED,
        toast=toast,
    )


def _again(
    request: HttpRequest, memory: Memory, toast: Toast | None = None, **forms
) -> HttpResponse:
    """The card stays, showing what was typed and an error or the wide-rule question."""
    return htmx.again(
        request,
        f"{PAGE}#findings-list",
        _list_context(memory, **forms),
        page=lambda: {"memory": memory, **_rules_context(memory)},
        toast=toast,
    )


# The page ------------------------------------------------------------------------------------


@require_GET
@vary_on_headers("HX-Request")
@access.requires(Permission.READ)
def findings(request: HttpRequest, memory: Memory) -> HttpResponse:
    hx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
    if hx:  # Cancel on the wide-rule question: the list as it is
        return render(request, f"{PAGE}#findings-list", _list_context(memory))
    return _page(request, memory)


@require_GET
@access.requires(Permission.READ)
def badge(request: HttpRequest, memory: Memory) -> HttpResponse:
    return render(request, f"{PAGE}#badge", {"count": counts.badge(request)})


@require_GET
@access.requires(Permission.READ)
def rules(request: HttpRequest, memory: Memory) -> HttpResponse:
    return render(request, f"{PAGE}#rules", _rules_context(memory))


@require_GET
@access.requires(Permission.READ)
def timeline(request: HttpRequest, memory: Memory) -> HttpResponse:
    events = Event.objects.for_memory(memory).readable_by(request.user)
    events = events.order_by("-created_at", "-pk")
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    # An event's name for Home Assistant is said only where it went (or will go) there.
    context = {"page": page, "home_assistant": review_timeline.configured()}
    return render(request, "review/timeline.html", context)


# Findings ------------------------------------------------------------------------------------


@require_POST
@access.requires(Permission.CURATE)
def not_a_problem(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    finding = _finding(memory, pk)
    form = _cleaned(NotAProblemForm(request.POST))  # the card's fields as typed, to show them again
    confirmed = form.pop("confirmed")
    try:
        until = _until(form["until"], form["until_date"])
        if form["scope"] in WIDE and not confirmed and not finding.protected:
            form["question"] = _question(finding, form["scope"], until)
            return _again(request, memory, finding_forms={finding.pk: form})
        # A protected finding never gets a wide rule, so there is nothing to confirm: the action
        # is asked anyway and its refusal is what the person sees.
        rule = review_findings.not_a_problem(
            finding=finding,
            by=request.user,
            reason=form["reason"],
            scope=form["scope"],
            until=until,
            confirmed=confirmed or finding.protected,
        )
    except ValidationError as error:
        form["error"] = htmx.reason(error)
        return _again(request, memory, finding_forms={finding.pk: form})
    except review_findings.Refused as refused:
        return _refused(request, memory, finding, refused, form)
    where = check_names.rule_words(rule).removeprefix("Not raised: ")
    return _done(request, memory, Toast(f"Not a problem: brain won't raise {where}."))


def _refused(
    request: HttpRequest,
    memory: Memory,
    finding: Finding,
    refused: review_findings.Refused,
    form: dict,
) -> HttpResponse:
    finding.refresh_from_db(fields=["state"])
    if finding.state != Finding.State.OPEN:  # someone settled it first
        return _done(request, memory, Toast(refused.message, "error"))
    form["error"] = refused.message
    return _again(
        request, memory, Toast(refused.message, "error"), finding_forms={finding.pk: form}
    )


SETTLED_NOTES = {
    Finding.Settled.FIXED: "Marked fixed: “{}” is quiet while it stays fixed.",
    Finding.Settled.GOT_IT: "Got it: “{}” is quiet while it stays fixed.",
    Finding.Settled.DONE: "Done: “{}”.",
}


@require_POST
@access.requires(Permission.TEACH)
def mark_fixed(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """I've already fixed it, Got it, and Done on a to-do: quiet only while it stays fixed."""
    finding = _finding(memory, pk)
    how = _cleaned(MarkFixedForm(request.POST))["how"]
    try:
        review_findings.mark_fixed(finding=finding, how=how, by=request.user)
    except review_findings.Refused as refused:
        return _done(request, memory, Toast(refused.message, "error"))
    return _done(request, memory, Toast(SETTLED_NOTES[how].format(finding.text)))


# Guesses -------------------------------------------------------------------------------------


@require_POST
@access.requires(Permission.TEACH)
def answer_guess(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """✓ Yes or ✕ No; two people answering at once: the second is told who won."""
    guess = _guess(memory, pk)
    posted = _cleaned(AnswerGuessForm(request.POST))
    answer, reason = posted["answer"], posted["reason"]
    try:
        answered = review_guesses.answer_guess(
            guess=guess, answer=answer, by=request.user, reason=reason
        )
    except review_guesses.Refused as refused:
        return _done(request, memory, Toast(refused.message, "error"))
    except ValidationError as error:  # a reason that can't be kept, such as a secret
        typed = {"reason": reason, "error": htmx.reason(error)}
        toast = Toast(typed["error"], "error")
        return _again(request, memory, toast, guess_forms={guess.pk: typed})
    return _done(request, memory, Toast(f"“{guess.text}”: {answered.message}"))


@require_POST
@access.requires(Permission.TEACH)
def dismiss_guess(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    guess = _guess(memory, pk)
    try:
        review_guesses.dismiss_guess(guess=guess, by=request.user)
    except review_guesses.Refused as refused:
        return _done(request, memory, Toast(refused.message, "error"))
    return _done(request, memory, Toast(f"Dismissed for now: “{guess.text}” comes back later."))


# Rules you set --------------------------------------------------------------------------------


@require_POST
@access.requires(Permission.CURATE)
def remove_rule(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """Undo / Let brain raise it again."""
    rule = get_object_or_404(Rule.objects.select_related("subject", "room"), pk=pk, memory=memory)
    described = check_names.rule_words(rule).removeprefix("Not raised: ")
    if rule.removed_at is None:
        review_findings.remove_rule(rule=rule, by=request.user)
        toast = Toast(f"Removed the rule: brain may raise {described} again.")
    else:
        toast = Toast("That rule was already removed.", "error")
    # Nothing waiting changes when a rule goes (its finding is closed), so no findingsChanged.
    return htmx.answer(
        request,
        f"{PAGE}#rules",
        _rules_context(memory),
        back=reverse("review:findings"),
        toast=toast,
    )


# Deep review (its button lives on the Knowledge tab) ----------------------------------------

DEEP_REVIEW = "review/deep_review.html"


@require_POST
@access.requires(Permission.CURATE)
def start_deep_review(request: HttpRequest, memory: Memory) -> HttpResponse:
    review = deep_review.start(memory=memory, by=request.user)
    return htmx.answer(
        request,
        f"{DEEP_REVIEW}#status",
        {"review": review},
        back=reverse("memory:knowledge"),
        said=Toast("Deep review started: what it finds arrives on the Findings tab.", "info"),
    )


@require_GET
@access.requires(Permission.READ)
def deep_review_status(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    review = get_object_or_404(DeepReview, pk=pk, memory=memory)
    finished = review.state != DeepReview.State.RUNNING
    return htmx.partial(
        request, f"{DEEP_REVIEW}#status", {"review": review}, event=CHANGED if finished else None
    )
