"""Facts over HTTP: list (search, filters, sorts, cursor pages), explain, outcome, context.

Every read goes through ``Fact.objects.readable_by``. Bad input is a 400 naming the problem;
every API's error answers are ``brain.api_errors``.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from brain import inputs
from brain.api_errors import bad_request
from brain.errors import in_words
from brain.inputs import allows_body, posted
from brain.words import plural
from knowledge import (
    access,
    actions,
    compile_requests,
    listing,
    passage_search,
    provenance,
    retrieval,
    sources,
)
from knowledge.models import Fact, Memory, Permission, Source
from knowledge.subjects import UnknownSubject


def readable_fact(request: Request, memory: Memory, pk: int) -> Fact:
    fact = Fact.objects.for_memory(memory).readable_by(request.user).filter(pk=pk).first()
    if fact is None:
        raise NotFound(access.not_found_words("fact", pk))
    return fact


class SubjectSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    entity_id = serializers.CharField()
    present = serializers.BooleanField()


class SubjectsField(serializers.ListField):
    """The subjects a request names, each by subject id, entity id, name or nickname
    (``knowledge.subjects.resolve``): none unless given, at most 50, none longer than an entity
    id may be."""

    child = serializers.CharField(max_length=255)

    def __init__(self, **kwargs):
        super().__init__(required=False, default=list, max_length=50, **kwargs)


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
    fact = readable_fact(request, memory, pk)
    return Response(provenance.explain(fact, reader=request.user))


class OutcomeSerializer(serializers.Serializer):
    success = serializers.BooleanField()


@extend_schema(request=OutcomeSerializer, responses={200: FactSerializer})
@api_view(["POST"])
@access.requires(Permission.TEACH)
def fact_outcome(request: Request, pk: int, memory: Memory) -> Response:
    """Report whether acting on a fact worked: the only thing that moves its confidence."""
    data = posted(OutcomeSerializer, request)
    fact = actions.record_outcome(fact=readable_fact(request, memory, pk), success=data["success"])
    return Response(FactSerializer(fact).data)


class ContextSerializer(serializers.Serializer):
    question = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    subjects = SubjectsField()
    token_budget = serializers.IntegerField(required=False, default=600)


@extend_schema(request=ContextSerializer, responses={200: dict})
@api_view(["POST"])
@access.requires(Permission.READ)
def context(request: Request, memory: Memory) -> Response:
    """The memory block a run is given for this question and these subjects."""
    data = posted(ContextSerializer, request)
    try:
        block = retrieval.context(memory=memory, reader=request.user, **data)
    except (retrieval.BadBudget, UnknownSubject) as problem:
        return bad_request(str(problem))
    return Response({"text": block.text, "fact_ids": block.fact_ids, "tokens": block.tokens})


# Sources: a note, a document or an email (knowledge/sources.py) --------------------------------


class NewSourceSerializer(serializers.Serializer):
    text = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="A note to paste."
    )
    file = serializers.FileField(
        required=False, allow_empty_file=True, help_text="A .txt, .md, .pdf or .eml file."
    )
    title = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
    labels = serializers.ListField(
        child=serializers.CharField(max_length=60), required=False, default=list, max_length=20
    )
    previous = serializers.IntegerField(
        required=False, help_text="The source this is a new version of."
    )


def source_body(source, reader) -> dict:
    """A source as the API shows it: its passages with their labels, those ``reader`` may read."""
    readable = source.passages.readable_by(reader).prefetch_related("labels").order_by("ordinal")
    return {
        "id": source.pk,
        "title": source.title,
        "kind": source.kind,
        "previous": source.previous_id,
        "created_at": source.created_at,
        "passages": [
            {
                "ordinal": passage.ordinal,
                "text": passage.text,
                "labels": [label.name for label in passage.labels.all()],
                "unsure": passage.unsure,
            }
            for passage in readable
        ],
    }


@extend_schema(request=NewSourceSerializer, responses={201: dict, 400: dict})
@allows_body(sources.MAX_UPLOAD_BYTES + 1024 * 1024)
@api_view(["POST"])
@access.requires(Permission.TEACH)
def new_source(request: Request, memory: Memory) -> Response:
    """Add a note (``text``) or a file (``file``: .txt, .md, .pdf or .eml, at most 50 MB),
    kept whole and cut into labelled passages; ``labels`` set on it are taken by its passages."""
    data = posted(NewSourceSerializer, request)
    upload = None
    if data.get("file") is not None:
        upload = sources.Upload(data["file"].name, data["file"].read())
    previous = None
    if data.get("previous") is not None:
        previous = Source.objects.filter(memory=memory, pk=data["previous"]).first()
        if previous is None:
            return bad_request(f"There is no source #{data['previous']} in {memory.name}.")
    added = sources.add_source(
        memory=memory,
        by=request.user,
        text=data.get("text") if upload is None else None,
        upload=upload,
        title=data["title"],
        labels=data["labels"],
        previous=previous,
    )
    body = {**source_body(added.source, request.user), "detail": added.message}
    return Response(body, status=status.HTTP_201_CREATED)


# Search across passages (knowledge/passage_search.py) -------------------------------------------


class PassageHitSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    ordinal = serializers.IntegerField()
    text = serializers.CharField()
    snippet = serializers.SerializerMethodField()
    labels = serializers.SerializerMethodField()
    # A field called "source": DRF's serializer takes it off the class, the stubs still see
    # Field.source (the attribute a field reads from).
    source = serializers.SerializerMethodField()  # type: ignore[assignment]
    url = serializers.SerializerMethodField()

    def get_snippet(self, passage) -> str:
        return passage_search.snippet_text(passage.snippet)

    def get_labels(self, passage) -> list[str]:
        return [label.name for label in passage.labels.all()]

    def get_source(self, passage) -> dict:
        return {"id": passage.source_id, "title": passage.source.title, "kind": passage.source.kind}

    def get_url(self, passage) -> str:
        return passage_search.link(passage)


class PassagePages(PageNumberPagination):
    """Numbered pages whose ``page`` and ``page_size`` are checked like any other input: a
    word where a number belongs is a 400 naming it (DRF's own answers 404 "Invalid page.", or
    quietly uses the default size), and a page past the last a 404 saying how many there are."""

    page_size = 20
    max_page_size = 100
    page_size_query_param = "page_size"

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param) or "1"
        if raw in self.last_page_strings:
            return paginator.num_pages
        return _whole_number(raw, "page", "a whole number from 1 (the first page)")

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if not raw:
            return self.page_size
        return _whole_number(
            raw,
            "page_size",
            f"a whole number from 1 to {self.max_page_size}",
            most=self.max_page_size,
        )

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound:
            count = self.django_paginator_class(queryset, self.get_page_size(request)).count
            pages = max(1, -(-count // self.get_page_size(request)))
            found = f"the {plural(count, 'passage')} found"
            fit = "fits on 1 page" if pages == 1 else f"fill {pages:,} pages"
            raise NotFound(
                f"There is no page {request.query_params.get(self.page_query_param)}: "
                f"{found} {fit}."
            ) from None


def _whole_number(raw: str, name: str, expected: str, *, most: int | None = None) -> int:
    """``raw`` as an int from 1 (to ``most``), or a 400 naming ``name`` and what it takes."""
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1 or (most and int(raw) > most):
        raise ParseError(f"{name} must be {expected}, not “{raw[:40]}”.")
    return int(raw)


@extend_schema(
    parameters=[
        OpenApiParameter("q", str, description="words to find in the passages you may read"),
        OpenApiParameter("memory", str, description="the memory's slug (default: the default)"),
    ],
    responses={200: PassageHitSerializer(many=True)},
)
@api_view(["GET"])
@access.requires(Permission.READ)
def passage_search_view(request: Request, memory: Memory) -> Response:
    """The passages you may read that hold the words of ``q``, best first, each with a snippet,
    its labels, its source and a link to the source view at that passage. A passage you may not
    read is never matched, counted or quoted."""
    try:
        q = passage_search.clean_query(request.query_params.get("q", ""))
    except ValidationError as error:
        return bad_request(in_words(error))
    if not q:
        return bad_request("Say what to search for: ?q=words.")
    found = passage_search.matching(memory, request.user, q).prefetch_related("labels")
    pages = PassagePages()
    page = pages.paginate_queryset(found, request)
    return pages.get_paginated_response(PassageHitSerializer(page, many=True).data)


# Compiling a source into facts on pages (knowledge/compile_requests.py) ------------------------


_memory_of_source = access.of_object(Source)


class CompileRunSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    state = serializers.CharField()
    message = serializers.CharField()
    reason = serializers.CharField()
    compiler = serializers.CharField()
    passages_total = serializers.IntegerField()
    passages_done = serializers.IntegerField()
    facts_filed = serializers.IntegerField()
    facts_known = serializers.IntegerField()
    unplaced = serializers.IntegerField()
    notes = serializers.ListField(child=serializers.CharField())
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


@extend_schema(request=None, responses={200: CompileRunSerializer, 202: CompileRunSerializer})
@api_view(["GET", "POST"])
@access.requires(Permission.READ, POST=Permission.ADMINISTER, of=_memory_of_source)
def source_compile(request: Request, pk: int, memory: Memory) -> Response:
    """GET: how far compiling the source into facts on pages has got (its newest run; 404
    before any). POST: compile it again on a worker — the passages not compiled yet and those
    placed on no page (202 with the run; 409 while learning is off)."""
    source = Source.objects.filter(memory=memory, pk=pk).readable_by(request.user).first()
    if source is None:
        raise NotFound(access.not_found_words("source", pk))
    if request.method == "POST":
        run = compile_requests.compile_again(source, by=request.user)
        return Response(CompileRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
    latest = compile_requests.latest(source)
    if latest is None:
        raise NotFound(f"“{source.title}” has not been compiled.")
    return Response(CompileRunSerializer(latest).data)
