"""Conversations over HTTP: ``POST /api/conversations/`` keeps a finished voice, chat or terminal
conversation whole and asks for its reflection; ``GET /api/conversations/<id>/`` shows it with
every reflection over it (what each filed, or why it filed nothing).

Limits (``memory.conversations``): 5,000 messages and 2 MB of words are accepted; more is a
413 naming the limit, and the body may be up to MAX_POST_BYTES (JSON's quoting of 2 MB of
words). Empty, an unknown channel or role, or a time that is not one is a 400 naming it; the
same reference with other messages a 409. Anyone who may teach the memory may post, signed in
or with their token; naming another person than yourself as the one signed in needs
administer (a service, such as a voice assistant, speaking for the household).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from brain.errors import in_words
from brain.inputs import allows_body, posted
from knowledge import access, visibility
from knowledge.models import Memory, Permission, Source, name_of
from memory import conversations, reflection
from memory.models import ReflectionRun


class MessageSerializer(serializers.Serializer):
    """One message as a client sends it; checked in full by ``memory.conversations``."""

    speaker = serializers.CharField(required=False, allow_blank=True)
    role = serializers.CharField(required=False, allow_blank=True)
    text = serializers.CharField()
    at = serializers.CharField(required=False, allow_blank=True)


class NewConversationSerializer(serializers.Serializer):
    channel = serializers.CharField(help_text="voice, chat or terminal")
    person = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The username of the person signed in, if anyone was.",
    )
    reference = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The conversation's own id; posting it again changes nothing.",
    )
    messages = MessageSerializer(many=True, help_text="Oldest first: speaker, text, at, role.")


class ReflectionSerializer(serializers.ModelSerializer):
    message = serializers.CharField(read_only=True)

    class Meta:
        model = ReflectionRun
        fields = [
            "id",
            "state",
            "since_turn",
            "read_to",
            "turns_read",
            "extractor",
            "filed",
            "reason",
            "message",
            "notes",
            "started_at",
            "finished_at",
        ]


def _conversation(source: Source, reader) -> dict:
    """A conversation as ``reader`` may see it: what its reflections filed only when they read
    all of it (a reflection reads every turn)."""
    reflections = source.reflections.order_by("since_turn")
    if not visibility.reads_whole(source, reader):
        reflections = reflections.none()
    return {
        "id": source.pk,
        "title": source.title,
        "channel": source.channel,
        "person": name_of(source.person) if source.person_id else None,
        "reference": source.reference,
        "messages": len(source.turns),
        "created_at": source.created_at,
        "url": reverse("knowledge:source", args=[source.pk]),
        "reflections": ReflectionSerializer(reflections, many=True).data,
    }


@extend_schema(request=NewConversationSerializer, responses={201: dict, 200: dict, 413: dict})
@allows_body(conversations.MAX_POST_BYTES)
@api_view(["POST"])
@access.requires(Permission.TEACH)
def new_conversation(request: Request, memory: Memory) -> Response:
    """Keep a finished voice, chat or terminal conversation whole, and reflect on it in the
    background: what it taught is filed as facts that cite it. Posting the same conversation
    again (its ``reference``, or the same messages) changes nothing: one source, one
    reflection. Another ``person`` than yourself needs administer (a service speaking for the
    household)."""
    raw = request.data
    messages = raw.get("messages") if isinstance(raw, dict) else None
    if isinstance(messages, list) and len(messages) > conversations.MAX_MESSAGES:
        return _too_large(  # refused before each message is checked
            f"That conversation has {len(messages):,} messages; brain keeps at most "
            f"{conversations.MAX_MESSAGES:,} in one conversation. Send it in parts, each under "
            "its own reference."
        )
    data = posted(NewConversationSerializer, request)
    person = conversations.person_named(data["person"])
    if person is not None and person != request.user:
        access.require(request.user, memory, Permission.ADMINISTER)
    try:
        recorded, _ = reflection.conversation_ended(
            memory=memory,
            channel=data["channel"],
            person=person,
            messages=messages if isinstance(messages, list) else [],
            reference=data["reference"] or None,
        )
    except conversations.TooLarge as too_large:
        return _too_large(in_words(too_large))
    body = {**_conversation(recorded.source, request.user), "created": recorded.created}
    body["detail"] = recorded.message
    return Response(body, status=status.HTTP_201_CREATED if recorded.added else status.HTTP_200_OK)


def _too_large(message: str) -> Response:
    return Response({"detail": message}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.READ)
def conversation_detail(request: Request, pk: int, memory: Memory) -> Response:
    """One conversation: what it is, and every reflection over it (what each filed, or why
    nothing)."""
    conversations_read = Source.objects.readable_by(request.user)
    source = get_object_or_404(
        conversations_read, pk=pk, memory=memory, kind=Source.Kind.CONVERSATION
    )
    return Response(_conversation(source, request.user))
