"""``POST /api/memory/add/bulk``: many statements at once (``memory.bulk``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from brain.api_errors import bad_request
from brain.inputs import posted
from knowledge import access
from knowledge import api as knowledge_api
from knowledge.models import Memory, Permission
from knowledge.subjects import UnknownSubject
from memory import bulk
from memory.models import Confidence


class BulkSerializer(serializers.Serializer):
    facts = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=True),
        min_length=1,
        max_length=bulk.MAX_STATEMENTS,
    )
    confidence = serializers.ChoiceField(choices=Confidence.values, default=Confidence.MEDIUM)
    subjects = knowledge_api.SubjectsField()


@extend_schema(request=BulkSerializer, responses={201: dict, 200: dict})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def add_many(request: Request, memory: Memory) -> Response:
    """Add up to 5,000 statements at once: talk and questions are not added, a statement that
    says something changed is judged against what is known, the rest are added without the
    write gate's judgement of each (``memory/bulk.py`` says what is judged and why): anyone
    who may teach this memory."""
    data = posted(BulkSerializer, request)
    try:
        added = bulk.add_many(
            memory=memory,
            texts=data["facts"],
            by=request.user,
            subjects=data["subjects"],
            confidence=data["confidence"],
        )
    except UnknownSubject as problem:
        return bad_request(str(problem))
    body = {
        "added": added.added,
        "known": added.known,
        "refused": added.refused,
        "not_facts": added.not_facts,
        "judged": added.judged,
        "detail": added.message,
    }
    return Response(body, status=status.HTTP_201_CREATED if added.added else status.HTTP_200_OK)
