"""Learning from use over HTTP: study sessions (``memory/study.py``). The same actions the
Knowledge tab and ``brain learn`` call.

Bad input is a 400 naming the problem and the limit; a refusal by state (learning off, nothing to
study yet, a study already running) is a 409 saying why (``brain.api_errors``).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from brain.errors import StateConflict
from knowledge import access
from knowledge.models import Memory, Permission
from memory import study
from memory.models import StudySession


class StudySessionSerializer(serializers.ModelSerializer):
    outcome = serializers.CharField(read_only=True)
    subject = serializers.StringRelatedField()

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
    form = NewStudySerializer(data=request.data)
    form.is_valid(raise_exception=True)
    started = study.start(memory=memory, topic=form.validated_data["topic"], by=request.user)
    if not started.started:
        raise StateConflict(started.message, session=StudySessionSerializer(started.session).data)
    return Response(StudySessionSerializer(started.session).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses={200: StudySessionSerializer})
@api_view(["GET"])
@access.requires(Permission.READ)
def study_session(request: Request, pk: int, memory: Memory) -> Response:
    """One study session: its step while it runs, its report once it has landed."""
    return Response(
        StudySessionSerializer(get_object_or_404(StudySession, pk=pk, memory=memory)).data
    )
