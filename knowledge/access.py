"""Who may do what in a memory, written once: every page, API call, MCP tool and CLI verb asks
``require`` (or ``may``) here, and nothing else decides.

The four permissions, each including the ones before it (``knowledge.models.Permission``):

- **read**: see the memory — the document, facts, changes, findings, context, explain.
- **teach**: tell it things (the Teach box, ``/api/memory/add``, the inbox, ``memory_write``)
  and report outcomes (the evidence that moves confidence); report findings and say one is
  fixed; answer its guesses.
- **curate**: change what it believes on a person's authority — edit, clear or undo the
  document, forget and restore facts, drop waiting items, settle conflicts, start a pass now,
  call a finding not a problem (a rule) and lift rules — and export everything.
- **administer**: import (which can replace the document), and change the memory's settings
  and who may do what (the admin site).

Where a person's permission comes from, first match wins:

1. Not signed in, or an inactive account: none.
2. The system (``user=None``: the worker, beat, a terminal without ``--as``, an MCP server
   started without ``--user``): administer. Whoever runs those already holds the database.
3. Superusers: administer in every memory (they can change every grant anyway). Staff who are
   not superusers may open the admin site, but in each memory they may do what their grant
   there says, like everyone else.
4. A ``Membership`` row for the person and the memory: its permission.
5. Otherwise ``settings.BRAIN_DEFAULT_PERMISSION`` — "teach" unless set: a household member
   with an account may tell brain things and see what it knows; correcting the memory on their
   authority (curate) is granted per person, per memory.

An API token is its person: ``TokenAuthentication`` signs the request in as the token's owner,
so a token carries exactly its person's permissions, no more.
"""

from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from knowledge import current
from knowledge.models import Membership, Memory, Permission

__all__ = [
    "NotPermitted",
    "Permission",
    "may",
    "memory_from_request",
    "permission_of",
    "require",
    "requires",
]

_VERBS = {
    Permission.READ: "read",
    Permission.TEACH: "teach",
    Permission.CURATE: "curate (edit, undo, forget, settle, export)",
    Permission.ADMINISTER: "administer",
}


class NotPermitted(PermissionDenied):
    """The person may not do this in this memory. Its message names what is needed and what
    they have, so the person knows whom to ask for what."""

    def __init__(self, memory: Memory, needed: Permission, has: Permission):
        self.memory, self.needed, self.has = memory, Permission(needed), Permission(has)
        if has == Permission.NONE:
            message = f"You have no access to the memory “{memory.name}”."
        else:
            message = (
                f"This needs permission to {_VERBS[self.needed]} in “{memory.name}”; you may "
                f"{self.has.label} there. An administrator can grant more."
            )
        super().__init__(message)


def _default() -> Permission:
    name = getattr(settings, "BRAIN_DEFAULT_PERMISSION", "teach")
    try:
        default = Permission[name.upper()]
    except KeyError:
        raise ImproperlyConfigured(
            f"BRAIN_DEFAULT_PERMISSION={name!r} is not one of none, read, teach, curate."
        ) from None
    if default == Permission.ADMINISTER:
        raise ImproperlyConfigured("BRAIN_DEFAULT_PERMISSION may not be administer.")
    return default


def _by_rule(user, granted: int | None) -> Permission:
    """The rule in the module docstring, given the person's grant in the memory (or None)."""
    if user is None:
        return Permission.ADMINISTER
    if not user.is_authenticated or not user.is_active:
        return Permission.NONE
    if user.is_superuser:
        return Permission.ADMINISTER
    return Permission(granted) if granted is not None else _default()


def _may_hold_grants(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active and not user.is_superuser


def permission_of(user, memory: Memory) -> Permission:
    """What ``user`` may do in ``memory`` (the rule in the module docstring)."""
    granted = None
    if _may_hold_grants(user):
        granted = (
            Membership.objects.filter(memory=memory, user=user)
            .values_list("permission", flat=True)
            .first()
        )
    return _by_rule(user, granted)


def may(user, memory: Memory, needed: Permission) -> bool:
    return permission_of(user, memory) >= needed


def require(user, memory: Memory, needed: Permission) -> Permission:
    """``user``'s permission in ``memory`` when it covers ``needed``; else ``NotPermitted``."""
    has = permission_of(user, memory)
    if has < needed:
        raise NotPermitted(memory, needed, has)
    return has


def memory_from_request(request: HttpRequest) -> Memory:
    """The memory the request is about: the one current memory (``knowledge.current``), or
    404 for a slug that names none."""
    return current.memory_of(request)


def of_object(model):
    """``requires(…, of=of_object(Source))`` for a view of one row of ``model`` named by the
    path's ``pk``: the memory the request names (address, header, posted field) when it names
    one — a row of another memory is then not found there, so Read as and every other choice
    made in one memory never reach another's rows; else the memory the row belongs to when the
    person may read it (a link that carries no ``?memory=``); else the request's own memory,
    where the view will not find the row.

    A row of a memory the person may not read and no row at all take the same path and the
    same queries, and the view's own lookup (``readable_row``) answers both with the same 404:
    whether a row exists is never told to someone who may not read it."""

    def of(request: HttpRequest, pk: int, **kwargs) -> Memory:
        if current.named(request):
            return memory_from_request(request)
        readable = {memory.pk: memory for memory in readable_memories(request.user)}
        owner = model._base_manager.filter(pk=pk).values_list("memory_id", flat=True).first()
        return readable.get(owner) or memory_from_request(request)

    return of


def not_found_words(noun: str, pk) -> str:
    """What a row that is not there, or that the person may not read, is called: the same
    words for both."""
    return f"There is no {noun} #{pk} you can read."


# (module, function name) → {HTTP method or "*": permission} of every view that declares what it
# needs: a test walks the URLs and checks each one is here, so a new endpoint cannot forget.
DECLARED: dict[tuple[str, str], dict[str, Permission]] = {}


def requires(needed: Permission, /, of=None, **by_method: Permission):
    """A view decorator for plain Django views and DRF ``@api_view`` functions alike (placed
    under ``@api_view``, so a token has signed the person in): resolve the request's memory,
    check ``needed`` (or ``by_method[request.method]``, e.g. ``PUT=Permission.CURATE``), and
    pass the memory to the view as ``memory=``. The person's permission stays on the request
    for ``context`` (pages offer only the buttons the person may use). ``of(request, **kwargs)``
    names the memory instead where the URL's object decides it (a source page opened from a
    link that carries no ``?memory=``).

    A refusal is ``NotPermitted``: a 403 with its message — ``templates/403.html`` for a page,
    a toast for htmx (``brain.middleware.NotPermittedToastMiddleware``), ``{"detail": …}``
    from DRF's exception handler for the API."""
    needs = {"*": Permission(needed)} | {m: Permission(p) for m, p in by_method.items()}

    def decorate(view):
        @wraps(view)
        def checked(request, *args, **kwargs):
            memory = of(request, **kwargs) if of else memory_from_request(request)
            request.permission = require(
                request.user, memory, needs.get(request.method, needs["*"])
            )
            return view(request, *args, memory=memory, **kwargs)

        DECLARED[(view.__module__, view.__name__)] = needs
        return checked

    return decorate


class PermittedRequest(HttpRequest):
    """A request as ``requires`` leaves it, for the type checker: the person's permission."""

    permission: Permission


class _May:
    """``may.teach``, ``may.curate``… in templates: what the person may do here."""

    def __init__(self, has: Permission):
        self.has = has

    def __getattr__(self, name: str) -> bool:
        try:
            return self.has >= Permission[name.upper()]
        except KeyError:
            raise AttributeError(name) from None


def readable_memories(user) -> list[Memory]:
    """The memories ``user`` may read, by name (two queries, however many memories)."""
    grants: dict[int, int] = {}
    if _may_hold_grants(user):
        grants = dict(Membership.objects.filter(user=user).values_list("memory_id", "permission"))
    everyone = Memory.objects.order_by("name")
    return [m for m in everyone if _by_rule(user, grants.get(m.pk)) >= Permission.READ]


def context(request: HttpRequest) -> dict:
    """A context processor: ``may`` for a view that declared its permission (nothing
    otherwise, so a template offers no action it cannot vouch for), and ``memories`` for the
    picker in the header (read only when a page shows it)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    found: dict[str, object] = {"memories": SimpleLazyObject(lambda: readable_memories(user))}
    has = getattr(request, "permission", None)
    if has is not None:
        found["may"] = _May(has)
    return found
