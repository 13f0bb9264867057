"""The ask bar on the Knowledge tab (``#ask``): ask and see the answer with the facts it used,
each with "this worked" / "this was wrong"; or teach. Works without JavaScript: the form posts
and comes back to the tab, which shows the last exchange (kept in the session)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_POST

from brain import htmx, words
from brain.htmx import Toast
from brain.inputs import BadInput
from knowledge import access, kinds
from knowledge.actions import record_outcome
from knowledge.models import Fact, Memory, Passage, Permission
from memory import ask
from memory.forms import OutcomeForm, TextForm

TEMPLATE = "memory/_ask.html"
CHANGED = "memoryChanged"


def _key(memory: Memory, what: str) -> str:
    return f"ask:{memory.pk}:{what}"


def _back() -> str:
    return reverse("memory:knowledge") + "#ask"


def _kept(exchange: ask.Exchange) -> dict:
    """The exchange as the session keeps it: words and ids, read again when shown. A line
    taught keeps one message (its answer) and lists its facts only when something was filed."""
    return {
        "kind": exchange.kind,
        "text": exchange.text,
        "answer": exchange.answer,
        "note": exchange.note,
        "facts": [fact.pk for fact in exchange.facts],
        "filed": exchange.filed,
        "knows": exchange.knows,
        "passages": [found.passage.pk for found in exchange.passages],
        "conversation": exchange.conversation.pk if exchange.conversation else None,
        "reflection": exchange.reflection_message,
    }


def ask_context(request: HttpRequest, memory: Memory, **typed) -> dict:
    """The ask bar and the last exchange in this memory, its facts and passages read again
    (their confidence as it is now, and only what this person may read)."""
    typed = {**request.session.pop(_key(memory, "typed"), {}), **typed}  # refused, without JS
    kept = request.session.get(_key(memory, "exchange"))
    if not kept:
        return {"exchange": None, **typed}
    readable = Fact.objects.for_memory(memory).readable_by(request.user).without_vectors()
    by_id = readable.in_bulk(kept["facts"])
    facts = [by_id[pk] for pk in kept["facts"] if pk in by_id]
    if kept["kind"] == ask.TEACH and not kept.get("filed", True):
        facts = []  # already known: its one message says so, nothing was filed to list
    wanted = kept.get("passages", [])
    found = (
        Passage.objects.for_memory(memory).readable_by(request.user).select_related("source")
    ).in_bulk(wanted)
    passages = [found[pk] for pk in wanted if pk in found]
    return {"exchange": kept, "ask_facts": facts, "ask_passages": passages, **typed}


@require_POST
@access.requires(Permission.READ)
def ask_or_teach(request: HttpRequest, memory: Memory) -> HttpResponse:
    form = TextForm(request.POST)
    form.is_valid()  # any words: ask.exchange says what it refuses
    text = form.cleaned_data["text"]
    if not kinds.asks(text):
        access.require(request.user, memory, Permission.TEACH)
    conversation = ask.conversation_of(
        memory, request.session.get(_key(memory, "conversation")), request.user
    )
    if conversation is not None and ask.is_idle(conversation):
        conversation = None
    try:
        exchange = ask.exchange(
            memory=memory, text=text, by=request.user, conversation=conversation
        )
    except htmx.REFUSALS as refused:
        words = htmx.reason(refused)
        if getattr(request, "htmx", False):  # the bar again, as typed, with why
            typed = ask_context(request, memory, ask_error=words, ask_text=text)
            return htmx.partial(request, f"{TEMPLATE}#ask", typed)
        request.session[_key(memory, "typed")] = {"ask_error": words, "ask_text": text}
        return htmx.answer(request, "", {}, back=_back(), said=Toast(words, "error"))
    if exchange.conversation is not None:
        request.session[_key(memory, "conversation")] = exchange.conversation.pk
    request.session[_key(memory, "exchange")] = _kept(exchange)
    taught = exchange.kind == ask.TEACH
    return htmx.answer(
        request,
        f"{TEMPLATE}#ask",
        ask_context(request, memory),
        back=_back(),
        event=CHANGED if taught else None,
        toast=Toast(exchange.message) if taught else None,
        said=None if taught else Toast(exchange.message, "info"),
    )


@require_POST
@access.requires(Permission.TEACH)
def outcome(request: HttpRequest, pk: int, memory: Memory) -> HttpResponse:
    """ "This worked" / "this was wrong" on a fact the answer used: its outcome recorded."""
    fact = get_object_or_404(Fact.objects.for_memory(memory).readable_by(request.user), pk=pk)
    form = OutcomeForm(request.POST)
    if not form.is_valid():  # no button on the page sends anything else
        raise BadInput("success must be 1 (it worked) or 0 (it was wrong).")
    success = form.cleaned_data["success"]
    fact = record_outcome(fact=fact, success=success)
    said = "worked" if success else "was wrong"
    toast = Toast(f"Noted that “{fact.text}” {said}: {words.how_sure(fact.confidence)}.")
    return htmx.answer(
        request, f"{TEMPLATE}#ask-fact", {"fact": fact}, back=_back(), toast=toast, event=CHANGED
    )
