"""The pages, mounted at ``/`` by brain/urls.py: every tab and what its forms post to.

Each tab keeps the URL namespace it has always had, so templates reverse the same names
(``memory:knowledge``, ``review:findings``, ``knowledge:sources``, ``settings:page``); the
House page is ``home``.
"""

from django.urls import include, path

from surfaces.views import (
    ask,
    core,
    curation,
    findings,
    house,
    knowledge,
    pages,
    review_queue,
    settings,
    sources,
    study,
    switches,
    workers,
)

# /knowledge/: the Knowledge tab, and the settings its sections of the Settings page post.
KNOWLEDGE = [
    path("", knowledge.knowledge, name="knowledge"),
    path("measures", knowledge.measures, name="measures"),
    path("reembedding", knowledge.reembedding_progress, name="reembedding"),
    path("document", knowledge.document, name="document"),
    path("document/edit", knowledge.document_editor, name="document-editor"),
    path("document/save", knowledge.save_document, name="save-document"),
    path("teach", knowledge.teach, name="teach"),
    path("waiting", knowledge.waiting, name="waiting"),
    path("waiting/<int:pk>/drop", knowledge.drop_item, name="drop"),
    path("file-now", knowledge.file_now, name="file-now"),
    path("runs/<int:pk>/banner", knowledge.banner, name="banner"),
    path("facts", knowledge.facts, name="facts"),
    path("facts/<int:pk>/forget", knowledge.forget_fact, name="forget-fact"),
    path("facts/<int:pk>/restore", knowledge.restore_fact, name="restore-fact"),
    path("to-settle", knowledge.to_settle, name="to-settle"),
    path("conflicts/<int:pk>/settle", knowledge.settle, name="settle"),
    path("conflicts/<int:pk>/resolve", curation.resolve_conflict, name="resolve-conflict"),
    path("pages/<int:pk>/merge", curation.merge_pages, name="merge-pages"),
    path("pages/<int:pk>/split", curation.split_page, name="split-page"),
    path("facts/<int:pk>/edit", curation.edit_fact, name="edit-fact"),
    path("changes", knowledge.changes, name="changes"),
    path("changes/<int:number>/undo", knowledge.undo, name="undo"),
    path("ask", ask.ask_or_teach, name="ask"),
    path("ask/facts/<int:pk>/outcome", ask.outcome, name="ask-outcome"),
    path("study", study.start_study, name="study"),
    path("study/<int:pk>", study.study_status, name="study-status"),
    path("first-setup", study.first_setup, name="first-setup"),
    # Settings (/settings/) posts here: the kill switches, the document's size, model calls.
    path("switches", switches.set_switches, name="switches"),
    path("document-size", switches.set_document_size, name="document-size"),
    path("model-routes", workers.set_routes, name="model-routes"),
    path("workers", workers.workers_region, name="workers"),
]

# /knowledge/core: the pinned core agents are given, posted from Settings.
CORE = [path("core", core.save_core, name="core")]

# /findings/: what waits on a decision, the rules a person set, the timeline.
FINDINGS = [
    path("", findings.findings, name="findings"),
    path("badge", findings.badge, name="badge"),
    path("rules", findings.rules, name="rules"),
    path("timeline", findings.timeline, name="timeline"),
    path("deep-review", findings.start_deep_review, name="deep-review"),
    path("deep-review/<int:pk>", findings.deep_review_status, name="deep-review-status"),
    path("<int:pk>/not-a-problem", findings.not_a_problem, name="not-a-problem"),
    path("<int:pk>/fixed", findings.mark_fixed, name="mark-fixed"),
    path("guesses/<int:pk>/answer", findings.answer_guess, name="answer-guess"),
    path("guesses/<int:pk>/dismiss", findings.dismiss_guess, name="dismiss-guess"),
    path("rules/<int:pk>/remove", findings.remove_rule, name="remove-rule"),
]

# /sources/: the sources, the pages (under /sources/pages/) and the review queue.
SOURCES = [
    path("", sources.sources, name="sources"),
    path("<int:pk>/", sources.source, name="source"),
    path("<int:pk>/compiling", sources.compile_status, name="compile-status"),
    path("<int:pk>/compile", sources.compile_source, name="compile-source"),
    path("add", sources.add_source, name="add-source"),
    path("pages/", pages.page_list, name="pages"),
    path("pages/<int:pk>/", pages.page, name="page"),
    path("read-as", pages.read_as, name="read-as"),
    path("review/", review_queue.review_queue, name="review"),
    path("review/<int:pk>/labels", review_queue.label_item, name="review-labels"),
    path("review/<int:pk>/leave", review_queue.leave_item, name="review-leave"),
    path("passages/<int:pk>/labels", sources.label_passage, name="label-passage"),
]

# /pages/: where a person types the Pages tab's name; the pages themselves live under
# /sources/pages/ (``knowledge:pages``).
PAGES_ELSEWHERE = [
    path("", pages.pages_elsewhere, name="pages-elsewhere"),
    path("<int:pk>/", pages.page_elsewhere, name="page-elsewhere"),
]

urlpatterns = [
    path("", house.house, name="home"),
    path("knowledge/", include((KNOWLEDGE, "memory"))),
    path("knowledge/", include((CORE, "agent"))),
    path("findings/", include((FINDINGS, "review"))),
    path("sources/", include((SOURCES, "knowledge"))),
    path("pages/", include(PAGES_ELSEWHERE)),
    path("settings/", include(([path("", settings.settings_page, name="page")], "settings"))),
]
