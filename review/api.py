"""Findings, rules, guesses, the sensors and the timeline over HTTP: the same actions the Findings
tab and the Home Assistant services call.

Bad input is a 400 naming the problem; a conflict (already settled, already answered, a wide
rule not confirmed) is a 409 saying why (``brain.api_errors`` answers both, whichever view
raised them); an id this memory does not have is a 404.
"""

from __future__ import annotations

from datetime import datetime, time

from django.utils import timezone
from django.utils.dateparse import parse_date
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from brain import inputs
from brain.errors import StateConflict
from brain.inputs import posted
from knowledge import access
from knowledge.models import Memory, Permission
from review import findings as review_findings
from review import guesses as review_guesses
from review import house_events as review_house_events
from review import status as review_status
from review.models import (
    MAX_REASON,
    MAX_TEXT,
    Event,
    Finding,
    Guess,
    HouseEvent,
    Rule,
    Severity,
)


def _finding(memory: Memory, pk: int) -> Finding:
    finding = Finding.objects.for_memory(memory).filter(pk=pk).first()
    if finding is None:
        raise NotFound(f"There is no finding #{pk}.")
    return finding


def _guess(memory: Memory, pk: int) -> Guess:
    guess = Guess.objects.for_memory(memory).filter(pk=pk).first()
    if guess is None:
        raise NotFound(f"There is no guess #{pk}.")
    return guess


# Findings ------------------------------------------------------------------------------------


class FindingSerializer(serializers.ModelSerializer):
    check = serializers.CharField(source="check_id")
    todo = serializers.BooleanField(source="is_todo")
    subject: serializers.StringRelatedField = serializers.StringRelatedField()
    returned_after = serializers.CharField(read_only=True)

    class Meta:
        model = Finding
        fields = [
            "id",
            "uid",
            "check",
            "entity_id",
            "subject",
            "severity",
            "text",
            "todo",
            "protected",
            "state",
            "settled_how",
            "first_raised_at",
            "last_raised_at",
            "times_raised",
            "returned_after",
            "settled_at",
            "suppressed_until",
            "reason",
        ]


class NewFindingSerializer(serializers.Serializer):
    check = serializers.CharField(max_length=100)
    entity_id = serializers.CharField(max_length=255, required=False, default="", allow_blank=True)
    severity = serializers.ChoiceField(choices=Severity.choices)
    text = serializers.CharField(max_length=MAX_TEXT)
    todo = serializers.BooleanField(required=False, default=False)
    protected = serializers.BooleanField(required=False, default=False)


class RaisedSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["new", "again", "returned", "quiet"])
    detail = serializers.CharField()
    finding = FindingSerializer(allow_null=True)


@extend_schema(
    request=NewFindingSerializer,
    responses={200: RaisedSerializer, 201: RaisedSerializer},
)
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.TEACH)
def findings(request: Request, memory: Memory) -> Response:
    """Open findings in review order (high-stakes first); POST is a house check reporting one.

    201: a new finding. 200: raised again (already open, or back after a fix, saying how long
    it stayed away) or not raised because a rule keeps it quiet (saying which)."""
    if request.method == "GET":
        rows = Finding.objects.for_memory(memory).open().in_review_order().select_related("subject")
        return Response(FindingSerializer(rows, many=True).data)
    data = posted(NewFindingSerializer, request)
    raised = review_findings.raise_finding(
        memory=memory,
        check_id=data["check"],
        text=data["text"],
        severity=data["severity"],
        entity_id=data["entity_id"].strip(),
        is_todo=data["todo"],
        protected=data["protected"],
    )
    body = {
        "outcome": raised.outcome,
        "detail": raised.message,
        "finding": FindingSerializer(raised.finding).data if raised.finding else None,
    }
    code = status.HTTP_201_CREATED if raised.outcome == "new" else status.HTTP_200_OK
    return Response(body, status=code)


class RuleSerializer(serializers.ModelSerializer):
    check = serializers.CharField(source="check_id")
    subject: serializers.StringRelatedField = serializers.StringRelatedField()
    room: serializers.StringRelatedField = serializers.StringRelatedField()
    description = serializers.CharField(source="describe", read_only=True)

    class Meta:
        model = Rule
        fields = [
            "id",
            "uid",
            "check",
            "scope",
            "entity_id",
            "subject",
            "room",
            "until",
            "reason",
            "origin",
            "finding",
            "created_at",
            "description",
        ]


class NotAProblemSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=MAX_REASON, required=False, default="", allow_blank=True
    )
    scope = serializers.ChoiceField(choices=Rule.Scope.choices, default=Rule.Scope.SENSOR)
    until = serializers.CharField(
        required=False,
        default="good",
        help_text='"good", "month", "season" or a date (YYYY-MM-DD) it lasts until.',
    )
    confirm = serializers.BooleanField(required=False, default=False)

    def validate_until(self, value: str) -> str | datetime:
        value = value.strip()
        if value in review_findings.UNTIL_CHOICES:
            return value
        try:
            moment = inputs.moment(value)  # in UTC: PostgreSQL refuses offsets past 15:59
            day = None if moment else parse_date(value)
        except ValueError:  # well formed but impossible, like month 13
            moment = day = None
        if day is not None:
            moment = datetime.combine(day, time.min)
        if moment is None:
            raise serializers.ValidationError(
                "until must be good, month, season or a date (YYYY-MM-DD)."
            )
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
        return moment


@extend_schema(request=NotAProblemSerializer, responses={201: RuleSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.CURATE)
def not_a_problem(request: Request, pk: int, memory: Memory) -> Response:
    """The check was wrong here: a rule it reads on its next pass. A rule for the room or
    everywhere must be sent with ``confirm: true``; without it the answer is a 409."""
    finding = _finding(memory, pk)
    data = posted(NotAProblemSerializer, request)
    rule = review_findings.not_a_problem(
        finding=finding,
        by=request.user,
        reason=data["reason"],
        scope=data["scope"],
        until=data["until"],
        confirmed=data["confirm"],
    )
    return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class FixedSerializer(serializers.Serializer):
    how = serializers.ChoiceField(choices=Finding.Settled.choices, default=Finding.Settled.FIXED)


@extend_schema(request=FixedSerializer, responses={200: FindingSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def fixed(request: Request, pk: int, memory: Memory) -> Response:
    """I've already fixed it, Got it, or a finished to-do: quiet only while it stays fixed."""
    finding = _finding(memory, pk)
    data = posted(FixedSerializer, request)
    settled = review_findings.mark_fixed(finding=finding, how=data["how"], by=request.user)
    return Response(FindingSerializer(settled).data)


# Rules ---------------------------------------------------------------------------------------


@extend_schema(responses={200: RuleSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def rules(request: Request, memory: Memory) -> Response:
    """Rules you set that are in force, newest first."""
    rows = (
        Rule.objects.for_memory(memory)
        .active()
        .select_related("subject", "room")
        .order_by("-created_at", "-pk")
    )
    return Response(RuleSerializer(rows, many=True).data)


@extend_schema(responses={204: None, 409: dict})
@api_view(["DELETE"])
@access.requires(Permission.CURATE)
def rule(request: Request, pk: int, memory: Memory) -> Response:
    """Let brain raise it again: the rule goes, and its finding may be raised again."""
    found = Rule.objects.for_memory(memory).filter(pk=pk).first()
    if found is None:
        raise NotFound(f"There is no rule #{pk}.")
    if found.removed_at is not None:
        raise StateConflict(f"Rule #{pk} was already removed.")
    review_findings.remove_rule(rule=found, by=request.user)
    return Response(status=status.HTTP_204_NO_CONTENT)


# Guesses -------------------------------------------------------------------------------------


class GuessSerializer(serializers.ModelSerializer):
    subject: serializers.StringRelatedField = serializers.StringRelatedField()

    class Meta:
        model = Guess
        fields = ["id", "uid", "question", "text", "why", "subject", "offered_at", "expires_at"]


@extend_schema(responses={200: GuessSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def guesses(request: Request, memory: Memory) -> Response:
    """Open guesses, waiting on a yes or a no, the oldest offered first."""
    rows = (
        Guess.objects.for_memory(memory)
        .open()
        .select_related("subject")
        .order_by("offered_at", "pk")
    )
    return Response(GuessSerializer(rows, many=True).data)


class AnswerSerializer(serializers.Serializer):
    answer = serializers.CharField(
        max_length=MAX_TEXT,
        allow_blank=True,
        help_text='Starts with yes or no: "yes", "no, it\'s the cat".',
    )
    reason = serializers.CharField(
        max_length=MAX_REASON, required=False, default="", allow_blank=True
    )


class AnsweredSerializer(serializers.Serializer):
    guess = serializers.IntegerField()
    state = serializers.CharField()
    fact = serializers.IntegerField(allow_null=True)
    detail = serializers.CharField()


@extend_schema(request=AnswerSerializer, responses={200: AnsweredSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def answer(request: Request, pk: int, memory: Memory) -> Response:
    """Answer a guess (the brain.answer_question service): a yes is filed as known, a no closes
    it for good and keeps the rest of the answer as a correction. When two people answer at
    once, one wins and the other gets a 409 naming who answered."""
    guess = _guess(memory, pk)
    data = posted(AnswerSerializer, request)
    answered = review_guesses.answer_guess(
        guess=guess,
        answer=data["answer"],
        reason=data["reason"],
        by=request.user,
    )
    return Response(
        {
            "guess": answered.guess.pk,
            "state": answered.guess.state,
            "fact": answered.guess.fact_id,
            "detail": answered.message,
        }
    )


@extend_schema(request=None, responses={200: GuessSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def dismiss(request: Request, pk: int, memory: Memory) -> Response:
    """Not now: the guess sleeps, off every screen and not counted, and comes back later."""
    guess = _guess(memory, pk)
    slept = review_guesses.dismiss_guess(guess=guess, by=request.user)
    return Response(GuessSerializer(slept).data)


# What Home Assistant shows -------------------------------------------------------------------


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.READ)
def sensors(request: Request, memory: Memory) -> Response:
    """The four sensors, as pushed to Home Assistant: memory_waiting_on_you, memory_facts_learned,
    memory_last_learned and findings_open_findings, each with its state and attributes —
    counted for the person asking (Home Assistant is told what every member may read)."""
    return Response(review_status.sensors(memory, reader=request.user))


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "kind", "text", "data", "created_at", "pushed_at"]


class TimelinePages(inputs.CursorPages):  # a forged cursor is a 400
    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = ("-created_at", "-pk")


@extend_schema(responses={200: EventSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def timeline(request: Request, memory: Memory) -> Response:
    """brain_learned and brain_finding events, newest first (cursor pagination: follow
    ``next``)."""
    pages = TimelinePages()
    events = Event.objects.for_memory(memory).readable_by(request.user)
    page = pages.paginate_queryset(events, request)
    return pages.get_paginated_response(EventSerializer(page, many=True).data)


# House events --------------------------------------------------------------------------------


class HouseEventSerializer(serializers.ModelSerializer):
    sent_as = serializers.CharField(source="reference")

    class Meta:
        model = HouseEvent
        fields = ["id", "entity_id", "state", "from_state", "cause", "who", "at", "sent_as"]


class NewHouseEventSerializer(serializers.Serializer):
    """One event; a batch is a list of these, or ``{"events": [...]}``."""

    entity_id = serializers.CharField(max_length=255, help_text="light.hall")
    state = serializers.CharField(max_length=review_house_events.STATE_MAX, help_text='"on"')
    from_state = serializers.CharField(required=False, allow_blank=True)
    cause = serializers.ChoiceField(choices=HouseEvent.Cause.choices)
    who = serializers.CharField(
        required=False, allow_blank=True, help_text="Sarah, or an automation"
    )
    at = serializers.DateTimeField()
    id = serializers.CharField(
        required=False, allow_blank=True, help_text="Your id for it: sent twice, kept once."
    )


class ReceivedSerializer(serializers.Serializer):
    received = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    events = serializers.ListField(child=serializers.IntegerField())
    detail = serializers.CharField()


class HouseEventPages(inputs.CursorPages):
    page_size = 100
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = ("-at", "-pk")


@extend_schema(
    request=NewHouseEventSerializer,
    responses={200: HouseEventSerializer(many=True), 201: ReceivedSerializer},
)
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.TEACH)
def house_events(request: Request, memory: Memory) -> Response:
    """What changed in the house, by hand or by an automation, when and by whom. POST one
    event, a list, or ``{"events": [...]}`` (at most 500): checked whole before any is kept,
    a 400 naming the event and the field otherwise. Insight runs read them. GET: the newest
    first (cursor pagination: follow ``next``)."""
    if request.method == "GET":
        pages = HouseEventPages()
        page = pages.paginate_queryset(HouseEvent.objects.for_memory(memory), request)
        return pages.get_paginated_response(HouseEventSerializer(page, many=True).data)
    received = review_house_events.record(memory=memory, body=request.data)
    return Response(
        {
            "received": len(received.events),
            "duplicates": received.duplicates,
            "events": [event.pk for event in received.events],
            "detail": received.message,
        },
        status=status.HTTP_201_CREATED,
    )
