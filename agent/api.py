"""Agent memory over HTTP: episodes, distilling, procedures, the sleep pass, decay, pruning,
outcomes, the core and the numbers — the same actions the MCP tools and `brain agent` call.

A token is its person (``knowledge.access``): reads need read; episodes, distilling, procedures,
outcomes and the sleep pass need teach; changing the core needs curate. Bad input is a 400
naming the problem (``brain.api_errors``, for every view); an answer carries the action's own
``message``.
"""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from agent import actions, tasks
from brain.inputs import posted
from knowledge import access, retrieval
from knowledge.episodes import MAX_EPISODE_CHARS
from knowledge.models import CORE_MAX_CHARS, Episode, Memory, Permission, Procedure

BIGGEST_ID = 2**63 - 1
LISTED = 200  # episodes or procedures in one answer


class EpisodeSerializer(serializers.ModelSerializer):
    recorded_by = serializers.CharField(source="recorded_by_name", read_only=True)

    class Meta:
        model = Episode
        fields = ["id", "text", "outcome", "occurred_at", "recorded_by", "restates", "distilled_at"]


class NewEpisodeSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=MAX_EPISODE_CHARS)
    # Checked by the action, so "failure" is refused with the words every surface uses.
    outcome = serializers.CharField(required=False, allow_blank=True, default="unknown")
    occurred_at = serializers.DateTimeField(required=False, default=None)


class DistilSerializer(serializers.Serializer):
    episode_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=BIGGEST_ID), max_length=LISTED
    )
    propositions = serializers.ListField(
        child=serializers.CharField(max_length=1000), allow_empty=True, max_length=LISTED
    )


class ProcedureSerializer(serializers.ModelSerializer):
    ref = serializers.SerializerMethodField()

    class Meta:
        model = Procedure
        fields = [
            "ref",
            "id",
            "task",
            "steps",
            "successes",
            "failures",
            "confidence",
            "created_at",
            "last_run_at",
        ]

    def get_ref(self, procedure: Procedure) -> str:
        return f"p{procedure.pk}"


class NewProcedureSerializer(serializers.Serializer):
    task = serializers.CharField(max_length=actions.MAX_TASK_CHARS)
    steps = serializers.ListField(
        child=serializers.CharField(max_length=actions.MAX_STEP_CHARS),
        allow_empty=False,
        max_length=actions.MAX_STEPS,
    )
    outcome = serializers.CharField(required=False, allow_blank=True, default="unknown")


class ProcedureOutcomeSerializer(serializers.Serializer):
    outcome = serializers.CharField()


class RefOutcomeSerializer(serializers.Serializer):
    ref = serializers.CharField(max_length=24)
    outcome = serializers.CharField()


class SleepSerializer(serializers.Serializer):
    wait = serializers.BooleanField(required=False, default=False)
    keep = serializers.IntegerField(required=False, default=actions.PRUNE_KEEP)


class KeepSerializer(serializers.Serializer):
    keep = serializers.IntegerField(required=False, default=actions.PRUNE_KEEP)


class RetrieveSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=4000, allow_blank=True)
    k = serializers.IntegerField(required=False, default=3, min_value=1, max_value=50)


class CoreSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, max_length=CORE_MAX_CHARS * 2)


# Episodes --------------------------------------------------------------------------------------


@extend_schema(request=NewEpisodeSerializer, responses={200: dict, 201: dict})
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.TEACH)
def episodes(request: Request, memory: Memory) -> Response:
    """GET: the latest episodes (``?pending=1``: those waiting for the sleep pass, oldest
    first). POST: record one (text, outcome ok|fail|unknown, occurred_at)."""
    if request.method == "GET":
        waiting = Episode.objects.for_memory(memory).pending()
        if request.query_params.get("pending"):
            listed = waiting.in_time_order()
        else:
            listed = Episode.objects.for_memory(memory).order_by("-occurred_at", "-pk")
        return Response(
            {
                "episodes": EpisodeSerializer(listed.defer("embedding")[:LISTED], many=True).data,
                "waiting": waiting.count(),
            }
        )
    data = posted(NewEpisodeSerializer, request)
    encoded = actions.encode(memory=memory, by=request.user, **data)
    return Response(
        {
            "episode": EpisodeSerializer(encoded.episode).data,
            "known_fact": encoded.known.pk if encoded.known is not None else None,
            "message": encoded.message,
        },
        status=status.HTTP_201_CREATED,
    )


def _distilled(distilled: actions.Distilled) -> dict:
    """What a distilling did, as a distil and a sleep pass both answer it: the facts it filed,
    the fragments it dropped and how many episodes still wait."""
    return {
        "fact_ids": [learned.fact.pk for learned in distilled.learned],
        "dropped": distilled.dropped,
        "waiting": distilled.waiting,
    }


@extend_schema(request=DistilSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def distil(request: Request, memory: Memory) -> Response:
    """Distil waiting episodes into the propositions given (an empty list clears them)."""
    data = posted(DistilSerializer, request)
    distilled = actions.distil(memory=memory, by=request.user, **data)
    return Response({**_distilled(distilled), "message": distilled.message})


# Procedures ------------------------------------------------------------------------------------


@extend_schema(request=NewProcedureSerializer, responses={200: dict, 201: dict})
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.TEACH)
def procedures(request: Request, memory: Memory) -> Response:
    """GET: the procedures, most useful first. POST: record a run (task, steps, outcome)."""
    if request.method == "GET":
        listed = sorted(
            Procedure.objects.for_memory(memory).defer("search_vector"),
            key=lambda procedure: (retrieval.utility(procedure), procedure.pk),
            reverse=True,
        )[:LISTED]
        return Response({"procedures": ProcedureSerializer(listed, many=True).data})
    data = posted(NewProcedureSerializer, request)
    recorded = actions.record_procedure(memory=memory, by=request.user, **data)
    return Response(
        {"procedure": ProcedureSerializer(recorded.procedure).data, "message": recorded.message},
        status=status.HTTP_201_CREATED if recorded.created else status.HTTP_200_OK,
    )


@extend_schema(request=ProcedureOutcomeSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def procedure_outcome(request: Request, pk: int, memory: Memory) -> Response:
    """Report a run of procedure ``pk``: outcome ok or fail."""
    procedure = get_object_or_404(Procedure.objects.for_memory(memory), pk=pk)
    data = posted(ProcedureOutcomeSerializer, request)
    recorded = actions.procedure_outcome(procedure=procedure, outcome=data["outcome"])
    return Response(
        {"procedure": ProcedureSerializer(recorded.procedure).data, "message": recorded.message}
    )


# The sleep pass, decay, pruning ----------------------------------------------------------------


def _ids(facts) -> list[int]:
    return [fact.pk for fact in facts]


@extend_schema(request=SleepSerializer, responses={200: dict, 202: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def sleep(request: Request, memory: Memory) -> Response:
    """The sleep pass (distil, decay, prune). ``wait``: run it now and answer what it did;
    otherwise it runs in the background (202), as a session's end asks for it."""
    data = posted(SleepSerializer, request)
    if not data["wait"]:
        transaction.on_commit(lambda: tasks.sleep.delay(memory.pk))
        return Response(
            {"message": "The sleep pass runs in the background."}, status=status.HTTP_202_ACCEPTED
        )
    slept = actions.sleep(memory=memory, by=request.user, keep=data["keep"])
    return Response(
        {
            "message": slept.message,
            **_distilled(slept.distilled),
            # None when nothing was decayed or pruned (learning off, or nothing to distil)
            "decayed": _ids(slept.decayed.retired) if slept.decayed else [],
            "pruned": _ids(slept.pruned.retired) if slept.pruned else [],
        }
    )


@extend_schema(request=None, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def decay(request: Request, memory: Memory) -> Response:
    """Retire the stale, never used, single-support beliefs."""
    decayed = actions.decay(memory=memory)
    return Response({"retired": _ids(decayed.retired), "message": decayed.message})


@extend_schema(request=KeepSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def prune(request: Request, memory: Memory) -> Response:
    """Cap the beliefs scored by outcomes at ``keep`` (default 20) a class."""
    data = posted(KeepSerializer, request)
    pruned = actions.prune(memory=memory, keep=data["keep"])
    return Response(
        {"retired": _ids(pruned.retired), "kept": pruned.kept, "message": pruned.message}
    )


# Reading and reporting -------------------------------------------------------------------------


@extend_schema(request=RetrieveSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.READ)
def retrieve(request: Request, memory: Memory) -> Response:
    """The k facts that best answer ``query`` (default 3), best first."""
    data = posted(RetrieveSerializer, request)
    facts = retrieval.retrieve(
        memory=memory, question=data["query"], reader=request.user, k=data["k"]
    )
    return Response(
        {
            "facts": [
                {
                    "id": fact.pk,
                    "text": fact.text,
                    "kind": fact.kind,
                    "valence": fact.valence,
                    "confidence": fact.confidence,
                    "support": fact.support,
                }
                for fact in facts
            ]
        }
    )


@extend_schema(request=RefOutcomeSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def outcome(request: Request, memory: Memory) -> Response:
    """Acting on a fact (``ref`` "12") or a procedure ("p3") worked (ok) or not (fail)."""
    data = posted(RefOutcomeSerializer, request)
    recorded = actions.record_outcome(memory=memory, reader=request.user, **data)
    return Response(
        {
            "ref": recorded.ref,
            "previous_confidence": recorded.previous_confidence,
            "confidence": recorded.confidence,
            "successes": recorded.successes,
            "failures": recorded.failures,
            "message": recorded.message,
        }
    )


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.READ)
def stats(request: Request, memory: Memory) -> Response:
    """How much the agent's memory holds."""
    counted = actions.stats(memory=memory, reader=request.user)
    return Response(
        {
            "memory": counted.memory,
            "beliefs": counted.beliefs,
            "failures": counted.failures,
            "procedures": counted.procedures,
            "episodes": counted.episodes,
            "pending": counted.pending,
            "retired": counted.retired,
            "core_tokens": counted.core_tokens,
            "message": counted.message,
        }
    )


@extend_schema(request=CoreSerializer, responses={200: dict})
@api_view(["GET", "PUT"])
@access.requires(Permission.READ, PUT=Permission.CURATE)
def core(request: Request, memory: Memory) -> Response:
    """The memory's pinned core; PUT replaces it (curators)."""
    if request.method == "GET":
        return Response({"text": memory.core, "tokens": retrieval.tokens(memory.core)})
    data = posted(CoreSerializer, request)
    saved = actions.set_core(memory=memory, text=data["text"], by=request.user)
    return Response(
        {"text": saved.text, "tokens": retrieval.tokens(saved.text), "message": saved.message}
    )
