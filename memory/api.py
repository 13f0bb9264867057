"""The memory document over HTTP: the same actions the web pages and the CLI call.

Bad input is a 400 naming the problem and the limit; a conflict (the document moved on, a pass
already running, a change that cannot be undone) is a 409 saying why (``brain.api_errors``
answers both, whichever view raised them). Nothing is half-written.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from brain.api_errors import bad_request
from brain.errors import StateConflict
from brain.inputs import posted
from knowledge import access, gate
from knowledge import api as knowledge_api
from knowledge.models import Conflict, Memory, Permission
from knowledge.subjects import UnknownSubject
from memory import actions, consolidator, revisions, taught
from memory.models import (
    Change,
    Confidence,
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    Origin,
)
from memory.taught import Statement


class InboxItemSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]  # a field, not Field.label

    class Meta:
        model = InboxItem
        fields = [
            "id",
            "text",
            "action",
            "origin",
            "confidence",
            "taught_by_name",
            "created_at",
            "state",
            "label",
            "outcome",
            "valence",
        ]


class NewInboxItemSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=taught.MAX_ITEM_CHARS, trim_whitespace=True)
    confidence = serializers.ChoiceField(choices=Confidence.values, default=Confidence.MEDIUM)
    origin = serializers.ChoiceField(choices=Origin.values, default=Origin.API)


class RunSerializer(serializers.ModelSerializer):
    outcome = serializers.CharField(read_only=True)
    elapsed_seconds = serializers.FloatField(read_only=True)

    class Meta:
        model = ConsolidationRun
        fields = [
            "id",
            "state",
            "trigger",
            "reason",
            "outcome",
            "composer",
            "started_at",
            "finished_at",
            "elapsed_seconds",
            "items_read",
            "lines_added",
            "lines_removed",
            "lines_replaced",
        ]


class ChangeSerializer(serializers.ModelSerializer):
    undone = serializers.SerializerMethodField()

    class Meta:
        model = Change
        fields = ["number", "source", "summary", "author_name", "created_at", "undone"]

    def get_undone(self, change: Change) -> bool:
        return change.undone_by_id is not None


class DocumentSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)
    base_generation = serializers.IntegerField(min_value=0)


@extend_schema(request=DocumentSerializer, responses={200: dict})
@api_view(["GET", "PUT"])
@access.requires(Permission.READ, PUT=Permission.CURATE)
def document(request: Request, memory: Memory) -> Response:
    """The memory document; PUT saves your edit (with the generation you read)."""
    if request.method == "PUT":
        edit = posted(DocumentSerializer, request)
        revisions.save_user_edit(
            memory=memory,
            text=edit["text"],
            base_generation=edit["base_generation"],
            by=request.user,
        )
    waiting = InboxItem.objects.for_memory(memory).pending().readable_by(request.user).count()
    last = ConsolidationRun.objects.latest_for(memory)
    return Response(
        {
            "memory": memory.slug,
            "document": revisions.as_json(revisions.current_revision(memory)),
            "waiting": waiting,
            "last_run": RunSerializer(last).data if last else None,
        }
    )


class AddMemorySerializer(serializers.Serializer):
    fact = serializers.CharField(trim_whitespace=True, max_length=10 * 1024 * 1024)
    confidence = serializers.ChoiceField(choices=Confidence.values, default=Confidence.MEDIUM)
    outcome = serializers.BooleanField(required=False, allow_null=True, default=None)
    verdict = serializers.ChoiceField(
        choices=gate.VERDICTS, required=False, allow_null=True, default=None
    )
    target = serializers.IntegerField(required=False, allow_null=True, default=None)
    subjects = knowledge_api.SubjectsField()


@extend_schema(request=AddMemorySerializer, responses={201: dict, 200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def add_memory(request: Request, memory: Memory) -> Response:
    """Queue a fact (the add_memory service): anyone who may teach this memory, signed in or
    with their token."""
    data = posted(AddMemorySerializer, request)
    try:
        learned = actions.learn(
            Statement.typed(
                memory=memory,
                text=data["fact"],
                origin=Origin.API,
                confidence=data["confidence"],
                by=request.user,
                outcome=data["outcome"],
                verdict=data["verdict"],
                target=data["target"],
                subjects=data["subjects"],
            )
        )
    except (UnknownSubject, gate.BadVerdict) as problem:
        return bad_request(str(problem))
    body = {
        "verdict": learned.verdict,
        "fact": learned.fact.pk,
        "support": learned.fact.support,
        "queued": learned.item is not None,
        "detail": learned.message,
    }
    return Response(body, status=status.HTTP_201_CREATED if learned.item else status.HTTP_200_OK)


@extend_schema(request=None, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.CURATE)
def forget_fact(request: Request, pk: int, memory: Memory) -> Response:
    """Forget a fact everywhere it is used (its document line goes at the next filing)."""
    fact = knowledge_api.readable_fact(request, memory, pk)
    return Response(
        {"fact": fact.pk, "detail": actions.forget(fact=fact, by=request.user, origin=Origin.API)}
    )


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.READ)
def voice(request: Request, memory: Memory) -> Response:
    """The voice distillate (at most 2 KB) a voice assistant splices into its prompt; empty
    while memory_injection is off."""
    return Response(
        {
            "memory": memory.slug,
            "memory_injection": memory.memory_injection,
            "voice": DocumentRevision.objects.voice_for_prompts(memory),
        }
    )


@extend_schema(
    request=NewInboxItemSerializer,
    responses={200: InboxItemSerializer(many=True), 201: InboxItemSerializer},
)
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.TEACH)
def inbox(request: Request, memory: Memory) -> Response:
    """What waits to be filed; POST queues a fact."""
    if request.method == "POST":
        data = posted(NewInboxItemSerializer, request)
        learned = actions.learn(Statement.typed(memory=memory, by=request.user, **data))
        if learned.item is None:
            return Response({"detail": learned.message, "fact": learned.fact.pk})
        return Response(InboxItemSerializer(learned.item).data, status=status.HTTP_201_CREATED)
    items = InboxItem.objects.for_memory(memory).pending().readable_by(request.user)
    return Response(InboxItemSerializer(items.in_filing_order(), many=True).data)


@extend_schema(responses={204: None})
@api_view(["DELETE"])
@access.requires(Permission.CURATE)
def inbox_item(request: Request, pk: int, memory: Memory) -> Response:
    """Drop a queued item: it leaves the queue and the document is not touched."""
    item = get_object_or_404(InboxItem.objects.readable_by(request.user), pk=pk, memory=memory)
    if not actions.drop_inbox_item(item=item, by=request.user):
        raise StateConflict(f"Item #{pk} is no longer waiting (it is {item.state}).")
    return Response(status=status.HTTP_204_NO_CONTENT)


def one_at_a_time(started: bool, message: str, *, name: str, run: dict) -> Response:
    """The answer to starting a run of which one goes at a time (a pass, a study): 202 with the
    new run, or, when one was already running, a 409 saying so that carries the running one
    under ``name``, as its own answer names it."""
    if not started:
        raise StateConflict(message, **{name: run})
    return Response(run, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=None, responses={202: RunSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.CURATE)
def consolidate(request: Request, memory: Memory) -> Response:
    """Start a pass now; it runs in the background. Poll the run for its outcome."""
    started = consolidator.request_consolidation(
        memory=memory, by=request.user, trigger=ConsolidationRun.Trigger.API
    )
    body = RunSerializer(started.run).data
    return one_at_a_time(started.started, started.message, name="run", run=body)


@extend_schema(responses={200: RunSerializer})
@api_view(["GET"])
@access.requires(Permission.READ)
def run(request: Request, pk: int, memory: Memory) -> Response:
    return Response(RunSerializer(get_object_or_404(ConsolidationRun, pk=pk, memory=memory)).data)


@extend_schema(responses={200: ChangeSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def changes(request: Request, memory: Memory) -> Response:
    """The change log, newest first (``?limit=``, at most 500)."""
    try:
        limit = min(max(int(request.query_params.get("limit", 50)), 1), 500)
    except ValueError:
        return bad_request("limit must be a whole number from 1 to 500.")
    rows = Change.objects.for_memory(memory).newest_first()[:limit]
    return Response(ChangeSerializer(rows, many=True).data)


@extend_schema(request=None, responses={200: ChangeSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.CURATE)
def undo(request: Request, number: int, memory: Memory) -> Response:
    """Revert exactly change ``number``; the undo is itself logged."""
    change = revisions.undo_change(memory=memory, number=number, by=request.user)
    return Response(ChangeSerializer(change).data)


# Conflicts to settle -------------------------------------------------------------------------


class ConflictFactSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    text = serializers.CharField()
    taught_by = serializers.CharField(source="taught_by_name")
    taught_at = serializers.DateTimeField(source="created_at")
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)


class ConflictSerializer(serializers.ModelSerializer):
    old = ConflictFactSerializer()
    new = ConflictFactSerializer()
    merged_into = serializers.IntegerField(source="merged_into_id", allow_null=True)

    class Meta:
        model = Conflict
        fields = ["id", "old", "new", "reason", "state", "resolution", "merged_into", "created_at"]


class SettleSerializer(serializers.Serializer):
    keep = serializers.ChoiceField(choices=Conflict.Resolution.choices)
    text = serializers.CharField(
        required=False, help_text="For merged: the statement written in place of both."
    )
    since = serializers.DateField(
        required=False,
        help_text="For dated: the day the older stopped being true and the newer began "
        "(by default, when the newer was said).",
    )


@extend_schema(responses={200: ConflictSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def conflicts(request: Request, memory: Memory) -> Response:
    """What waits to be settled: pairs of statements that may not both be true, both still
    believed, newest first."""
    rows = Conflict.objects.for_memory(memory).readable_by(request.user).to_settle()
    return Response(ConflictSerializer(rows, many=True).data)


@extend_schema(request=SettleSerializer, responses={200: ConflictSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.CURATE)
def settle(request: Request, pk: int, memory: Memory) -> Response:
    """Keep the new statement, the old one, both, both with their dates (``since``), or merge
    them (``text``). Settled already: a 409 saying how."""
    conflict = get_object_or_404(
        Conflict.objects.for_memory(memory).readable_by(request.user), pk=pk
    )
    asked = posted(SettleSerializer, request)
    settled = actions.settle_conflict(
        conflict=conflict,
        keep=asked["keep"],
        text=asked.get("text"),
        since=asked.get("since"),
        by=request.user,
    )
    return Response({**ConflictSerializer(settled.conflict).data, "detail": settled.message})
