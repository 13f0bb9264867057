"""The API's endpoints that span the apps: the export of a whole memory."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request

from knowledge import access
from knowledge.models import Memory, Permission
from surfaces import portable


@extend_schema(responses={200: dict})
@api_view(["GET"])
@access.requires(Permission.CURATE)
def export(request: Request, memory: Memory) -> HttpResponse:
    """Everything learned that the person may read, as the file `brain memory import` reads."""
    stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
    text = portable.export_json(memory, reader=request.user)
    response = HttpResponse(text, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="brain-{memory.slug}-{stamp}.json"'
    return response
