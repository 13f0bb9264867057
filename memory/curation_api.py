"""Review and curating over HTTP: the queue as the person may read it, and the same curating
actions the page view calls (merge two pages, split a page, edit a fact), each one change in
the log that ``POST /api/memory/changes/N/undo`` undoes.

Bad input is a 400 naming the problem; a refusal by the state of things (a page merged with
itself, a fact no longer in use) a 409 saying why (``brain.api_errors``).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from brain.inputs import posted
from knowledge import access, review_items
from knowledge.models import Fact, Memory, Permission, ReviewItem, Subject
from memory import curation, fact_edits, taught

REVIEW_ITEMS_SHOWN = 200


class CitedPassageSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    source = serializers.IntegerField(source="source_id")  # type: ignore[assignment]  # a field, not Field.source
    source_title = serializers.CharField(source="source.title")
    ordinal = serializers.IntegerField()
    text = serializers.CharField()


class SideSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    text = serializers.CharField()
    taught_by = serializers.CharField(source="taught_by_name")
    valid_from = serializers.DateTimeField()
    passages = CitedPassageSerializer(source="cited", many=True)
    pages = serializers.SerializerMethodField()

    def get_pages(self, fact) -> list[int]:
        return [page.pk for page in fact.pages]


class ReviewConflictSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    old = SideSerializer()
    new = SideSerializer()
    reason = serializers.CharField()


class ReviewItemSerializer(serializers.ModelSerializer):
    passages = CitedPassageSerializer(many=True)
    conflict = ReviewConflictSerializer(allow_null=True)
    source = serializers.IntegerField(source="source_id", allow_null=True)  # type: ignore[assignment]  # a field, not Field.source

    class Meta:
        model = ReviewItem
        fields = ["id", "kind", "question", "source", "passages", "conflict", "created_at"]


@extend_schema(responses={200: ReviewItemSerializer(many=True)})
@api_view(["GET"])
@access.requires(Permission.READ)
def review_queue(request: Request, memory: Memory) -> Response:
    """What waits on a person that they may read (labelling doubts, conflicts with the
    passages of both sides, unplaced passages), newest first."""
    items = review_items.shown(review_items.waiting(memory, request.user)[:REVIEW_ITEMS_SHOWN])
    return Response(ReviewItemSerializer(items, many=True).data)


class CuratedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    change = serializers.IntegerField(help_text="The change in the log that undoes it.")
    page = serializers.IntegerField(allow_null=True)


def _curated(done: curation.Curated) -> Response:
    page = done.page.pk if done.page is not None else None
    return Response({"detail": done.message, "change": done.change.number, "page": page})


class MergeSerializer(serializers.Serializer):
    merged = serializers.IntegerField(help_text="The page merged into this one.")


@extend_schema(request=MergeSerializer, responses={200: CuratedSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.ADMINISTER)
def merge_pages(request: Request, pk: int, memory: Memory) -> Response:
    """Merge page ``merged`` into page ``pk``: its facts move, its names become nicknames."""
    data = posted(MergeSerializer, request)
    pages = Subject.objects.readable_by(request.user)
    keep = get_object_or_404(pages, pk=pk, memory=memory)
    merged = get_object_or_404(pages, pk=data["merged"], memory=memory)
    return _curated(curation.merge_pages(keep=keep, merged=merged, by=request.user))


class SplitSerializer(serializers.Serializer):
    facts = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=Subject.Kind.choices)


@extend_schema(request=SplitSerializer, responses={200: CuratedSerializer})
@api_view(["POST"])
@access.requires(Permission.ADMINISTER)
def split_page(request: Request, pk: int, memory: Memory) -> Response:
    """Move ``facts`` off page ``pk`` onto a new page called ``name`` of type ``kind``."""
    data = posted(SplitSerializer, request)
    page = get_object_or_404(Subject.objects.readable_by(request.user), pk=pk, memory=memory)
    return _curated(curation.split_page(page=page, by=request.user, **data))


class EditSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=taught.MAX_ITEM_CHARS)


class EditedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    fact = serializers.IntegerField(help_text="The fact that says the new words.")
    change = serializers.IntegerField(allow_null=True)


@extend_schema(request=EditSerializer, responses={200: EditedSerializer, 409: dict})
@api_view(["POST"])
@access.requires(Permission.ADMINISTER)
def edit_fact(request: Request, pk: int, memory: Memory) -> Response:
    """Change fact ``pk``'s words: the new words keep its citations; the change log undoes it."""
    data = posted(EditSerializer, request)
    fact = get_object_or_404(
        Fact.objects.for_memory(memory).readable_by(request.user).without_vectors(), pk=pk
    )
    edited = fact_edits.edit_fact(fact=fact, text=data["text"], by=request.user)
    change = edited.change.number if edited.change is not None else None
    return Response({"detail": edited.message, "fact": edited.fact.pk, "change": change})
