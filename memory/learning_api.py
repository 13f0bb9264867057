"""Learning from use over HTTP: the ask bar (``memory/ask.py``) and study sessions
(``memory/study.py``). The same actions the Knowledge tab and ``brain learn`` call.

Bad input is a 400 naming the problem and the limit; a refusal by state (learning off, nothing to
study yet, a study already running) is a 409 saying why (``brain.api_errors``).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from brain.inputs import posted
from knowledge import access, kinds
from knowledge.models import Fact, Memory, Permission
from memory import api as memory_api
from memory import ask, study
from memory.models import StudySession


class StudySessionSerializer(serializers.ModelSerializer):
    outcome = serializers.CharField(read_only=True)
    subject: serializers.StringRelatedField = serializers.StringRelatedField()

    class Meta:
        model = StudySession
        fields = [
            "id",
            "topic",
            "subject",
            "chosen",
            "state",
            "step",
            "outcome",
            "facts_read",
            "stale",
            "thin",
            "contradictions",
            "filed",
            "report",
            "lines",
            "started_at",
            "finished_at",
        ]


class NewStudySerializer(serializers.Serializer):
    topic = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=True,
        help_text="What to study; empty: whatever has gone stalest.",
    )


@extend_schema(request=NewStudySerializer, responses={202: StudySessionSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def start_study(request: Request, memory: Memory) -> Response:
    """Study a topic (or the stalest subject) in the background; poll the session for its
    progress and, when it lands, its report. One runs at a time: a 409 names the running one."""
    data = posted(NewStudySerializer, request)
    started = study.start(memory=memory, topic=data["topic"], by=request.user)
    session = StudySessionSerializer(started.session).data
    return memory_api.one_at_a_time(started.started, started.message, name="session", run=session)


@extend_schema(responses={200: StudySessionSerializer})
@api_view(["GET"])
@access.requires(Permission.READ)
def study_session(request: Request, pk: int, memory: Memory) -> Response:
    """One study session: its step while it runs, its report once it has landed."""
    return Response(
        StudySessionSerializer(
            get_object_or_404(StudySession.objects.readable_by(request.user), pk=pk, memory=memory)
        ).data
    )


# The ask bar ---------------------------------------------------------------------------------


class AskSerializer(serializers.Serializer):
    text = serializers.CharField(
        max_length=1000,
        trim_whitespace=True,
        help_text='A question ("what temperature does Sarah like the bedroom?") or something '
        'to remember ("the garage freezer is off in winter").',
    )
    conversation = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The conversation an earlier answer named, to go on with it.",
    )


class UsedFactSerializer(serializers.ModelSerializer):
    class Meta:
        model = Fact
        fields = ["id", "text", "confidence", "successes", "failures"]


class UsedPassageSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="passage.pk")
    source = serializers.IntegerField(source="passage.source_id")  # type: ignore[assignment]  # a field, not Field.source
    source_title = serializers.CharField()
    text = serializers.CharField()
    url = serializers.CharField()


class ExchangeSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[ask.ASK, ask.TEACH])
    answer = serializers.CharField()
    knows = serializers.BooleanField(help_text="A line or a passage passed the relevance floor.")
    facts = UsedFactSerializer(
        many=True, help_text="What the answer used, the best first, or what was filed."
    )
    passages = UsedPassageSerializer(
        many=True, help_text="Passages of the household's notes and documents it used."
    )
    note = serializers.CharField()
    conversation = serializers.IntegerField(allow_null=True)
    reflection = serializers.CharField(allow_blank=True)
    detail = serializers.CharField()


@extend_schema(request=AskSerializer, responses={200: ExchangeSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.READ)
def ask_or_teach(request: Request, memory: Memory) -> Response:
    """Ask a question and get an answer from what is known, with the facts it used (report
    whether one worked with ``POST /api/facts/<id>/outcome``), or teach something plainly. A
    question needs read, teaching needs teach; with learning off a question is still answered
    and teaching is a 409."""
    data = posted(AskSerializer, request)
    text = data["text"]
    if not kinds.asks(text):
        access.require(request.user, memory, Permission.TEACH)
    pk = data["conversation"]
    conversation = ask.conversation_of(memory, pk, request.user)
    if pk and conversation is None:
        raise NotFound(f"There is no conversation #{pk} of yours from the ask bar.")
    exchange = ask.exchange(memory=memory, text=text, by=request.user, conversation=conversation)
    return Response(
        {
            "kind": exchange.kind,
            "answer": exchange.answer,
            "knows": exchange.knows,
            "facts": UsedFactSerializer(exchange.facts, many=True).data,
            "passages": UsedPassageSerializer(exchange.passages, many=True).data,
            "note": exchange.note,
            "conversation": exchange.conversation.pk if exchange.conversation else None,
            "reflection": exchange.reflection_message,
            "detail": exchange.message,
        }
    )
