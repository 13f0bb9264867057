"""Facts over HTTP: list (search, filters, sorts, cursor pages), explain, outcome, context.

Every read goes through ``Fact.objects.readable_by``. Bad input is a 400 naming the problem.
Every API's error answers are here: 400, 409, and the 503 of ``exception_handler``.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from brain import inputs
from brain.db import retry
from knowledge import access, actions, listing, provenance, retrieval
from knowledge.models import Fact, Memory, Permission
from knowledge.subjects import UnknownSubject


def bad_request(message: str) -> Response:
    return Response({"detail": message}, status=status.HTTP_400_BAD_REQUEST)


def invalid(error: ValidationError) -> Response:
    """A 400 naming every problem a ValidationError carries."""
    return bad_request(" ".join(error.messages))


def conflict(message: str, **extra) -> Response:
    """A 409: the request was fine, but the state has moved on (and says how)."""
    return Response({"detail": message, **extra}, status=status.HTTP_409_CONFLICT)


def busy() -> Response:
    """A 503: the write lost a lock race on every attempt. Nothing was saved; sending it again
    in a moment works. The pages and the agent say the same (``brain.db.retry.BUSY_MESSAGE``)."""
    return Response(
        {"detail": retry.BUSY_MESSAGE},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(retry.BUSY_RETRY_AFTER_S)},
    )


def exception_handler(error: Exception, context: dict) -> Response | None:
    """DRF's mapping, plus the last safety net for a write: the actions retry a deadlock or a
    serialisation failure, and one that still reaches a view is a 503, never a 500."""
    if retry.is_retryable(error):
        return busy()
    return drf_exception_handler(error, context)


def readable_fact(request: Request, memory: Memory, pk: int) -> Fact:
    fact = Fact.objects.for_memory(memory).readable_by(request.user).filter(pk=pk).first()
    if fact is None:
        raise NotFound(f"There is no fact #{pk} you can read.")
    return fact


class SubjectSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    entity_id = serializers.CharField()
    present = serializers.BooleanField()


class FactSerializer(serializers.ModelSerializer):
    subjects = SubjectSerializer(many=True, read_only=True)
    believed = serializers.BooleanField(source="is_live", read_only=True)

    class Meta:
        model = Fact
        fields = [
            "id",
            "text",
            "kind",
            "valence",
            "channel",
            "taught_by_name",
            "created_at",
            "confidence",
            "support",
            "successes",
            "failures",
            "status",
            "valid_from",
            "valid_to",
            "superseded_by",
            "expires_at",
            "subjects",
            "believed",
        ]


class FactPages(inputs.CursorPages):  # a forged cursor is a 400
    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"

    def get_ordering(self, request, queryset, view):
        return queryset.query.order_by


FILTER_PARAMETERS = [
    OpenApiParameter(name, str, description=description)
    for name, description in (
        ("q", "words in the fact, or in its subject's name, nickname or entity id"),
        ("subject", "a subject id, entity id, name or nickname"),
        ("subject_kind", "house | room | device | person"),
        ("kind", "preference, nickname, correction, quirk, health_note, rule, judgement…"),
        ("channel", "voice, chat, terminal, typed, insight, study, import, api"),
        ("taught_by", "a username"),
        ("status", "live (default), all, queued, filed, forgotten, expired, superseded"),
        ("sort", "newest (default), oldest, certain, subject"),
        ("as_of", "what was believed at this time (ISO 8601)"),
        ("memory", "the memory's slug (default: the default memory)"),
    )
]


@extend_schema(parameters=FILTER_PARAMETERS, responses={200: FactSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def fact_list(request: Request, memory: Memory) -> Response:
    """Every fact, one page at a time (cursor pagination: follow ``next``)."""
    try:
        facts = listing.facts_for(
            memory, request.user, listing.FactFilters.from_params(request.query_params)
        )
    except listing.BadFilter as problem:
        return bad_request(str(problem))
    pages = FactPages()
    page = pages.paginate_queryset(facts, request)
    return pages.get_paginated_response(FactSerializer(page, many=True).data)


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.READ)
def fact_explain(request: Request, pk: int, memory: Memory) -> Response:
    """Why brain thinks it: who taught it, when, from where, what it replaced, its outcomes."""
    return Response(provenance.explain(readable_fact(request, memory, pk)))


class OutcomeSerializer(serializers.Serializer):
    success = serializers.BooleanField()


@extend_schema(request=OutcomeSerializer, responses={200: FactSerializer})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def fact_outcome(request: Request, pk: int, memory: Memory) -> Response:
    """Report whether acting on a fact worked: the only thing that moves its confidence."""
    form = OutcomeSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    fact = actions.record_outcome(
        fact=readable_fact(request, memory, pk), success=form.validated_data["success"]
    )
    return Response(FactSerializer(fact).data)


class ContextSerializer(serializers.Serializer):
    question = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    subjects = serializers.ListField(
        child=serializers.CharField(max_length=255), required=False, default=list, max_length=50
    )
    token_budget = serializers.IntegerField(required=False, default=600)


@extend_schema(request=ContextSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.READ)
def context(request: Request, memory: Memory) -> Response:
    """The memory block a run is given for this question and these subjects."""
    form = ContextSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    try:
        block = retrieval.context(memory=memory, reader=request.user, **form.validated_data)
    except (retrieval.BadBudget, UnknownSubject) as problem:
        return bad_request(str(problem))
    return Response({"text": block.text, "fact_ids": block.fact_ids, "tokens": block.tokens})
