"""/api/, mounted by brain/urls.py: every app's endpoints, each under the namespace it has always
had (``memory-api``, ``knowledge-api``, ``review-api``, ``learning-api``, ``conversations-api``,
``agent-api``), and the export of everything a memory holds (``/api/memory/export``). The views
are the apps' own API modules; the worker protocol's addresses are ``surfaces.worker_urls``.
"""

from django.urls import include, path

from agent import api as agent_api
from knowledge import api as knowledge_api
from memory import api as memory_api
from memory import bulk_api, conversation_api, curation_api, learning_api
from review import api as review_api
from surfaces import api

# /api/memory/: the memory document, its inbox, passes and changes, and the export.
MEMORY = [
    path("", memory_api.document, name="document"),
    path("voice", memory_api.voice, name="voice"),
    path("add", memory_api.add_memory, name="add"),
    path("add/bulk", bulk_api.add_many, name="add-bulk"),
    path("facts/<int:pk>/forget", memory_api.forget_fact, name="forget-fact"),
    path("inbox", memory_api.inbox, name="inbox"),
    path("inbox/<int:pk>", memory_api.inbox_item, name="inbox-item"),
    path("consolidate", memory_api.consolidate, name="consolidate"),
    path("runs/<int:pk>", memory_api.run, name="run"),
    path("changes", memory_api.changes, name="changes"),
    path("changes/<int:number>/undo", memory_api.undo, name="undo"),
    path("conflicts", memory_api.conflicts, name="conflicts"),
    path("conflicts/<int:pk>/settle", memory_api.settle, name="settle"),
    path("review", curation_api.review_queue, name="review"),
    path("pages/<int:pk>/merge", curation_api.merge_pages, name="merge-pages"),
    path("pages/<int:pk>/split", curation_api.split_page, name="split-page"),
    path("facts/<int:pk>/edit", curation_api.edit_fact, name="edit-fact"),
    path("export", api.export, name="export"),
]

KNOWLEDGE = [
    path("facts/", knowledge_api.fact_list, name="facts"),
    path("facts/<int:pk>/", knowledge_api.fact_explain, name="fact"),
    path("facts/<int:pk>/outcome", knowledge_api.fact_outcome, name="outcome"),
    path("context", knowledge_api.context, name="context"),
    path("sources/", knowledge_api.new_source, name="sources"),
    path("sources/<int:pk>/compile", knowledge_api.source_compile, name="source-compile"),
    path("passages/", knowledge_api.passage_search_view, name="passages"),
]

REVIEW = [
    path("findings/", review_api.findings, name="findings"),
    path("findings/<int:pk>/not-a-problem", review_api.not_a_problem, name="not-a-problem"),
    path("findings/<int:pk>/fixed", review_api.fixed, name="fixed"),
    path("rules/", review_api.rules, name="rules"),
    path("rules/<int:pk>", review_api.rule, name="rule"),
    path("guesses/", review_api.guesses, name="guesses"),
    path("guesses/<int:pk>/answer", review_api.answer, name="answer"),
    path("guesses/<int:pk>/dismiss", review_api.dismiss, name="dismiss"),
    path("status/", review_api.sensors, name="status"),
    path("timeline/", review_api.timeline, name="timeline"),
    path("events/", review_api.house_events, name="events"),
]

LEARNING = [
    path("ask", learning_api.ask_or_teach, name="ask"),
    path("study/", learning_api.start_study, name="study"),
    path("study/<int:pk>", learning_api.study_session, name="study-session"),
]

CONVERSATIONS = [
    path("conversations/", conversation_api.new_conversation, name="conversations"),
    path("conversations/<int:pk>/", conversation_api.conversation_detail, name="conversation"),
]

AGENT = [
    path("episodes/", agent_api.episodes, name="episodes"),
    path("episodes/distil", agent_api.distil, name="distil"),
    path("procedures/", agent_api.procedures, name="procedures"),
    path("procedures/<int:pk>/outcome", agent_api.procedure_outcome, name="procedure-outcome"),
    path("agent/sleep", agent_api.sleep, name="sleep"),
    path("agent/decay", agent_api.decay, name="decay"),
    path("agent/prune", agent_api.prune, name="prune"),
    path("agent/retrieve", agent_api.retrieve, name="retrieve"),
    path("agent/outcome", agent_api.outcome, name="outcome"),
    path("agent/stats", agent_api.stats, name="stats"),
    path("agent/core", agent_api.core, name="core"),
]

urlpatterns = [
    path("memory/", include((MEMORY, "memory-api"))),
    path("", include((KNOWLEDGE, "knowledge-api"))),
    path("", include((REVIEW, "review-api"))),
    path("", include((LEARNING, "learning-api"))),
    path("", include((CONVERSATIONS, "conversations-api"))),
    path("", include((AGENT, "agent-api"))),
]
