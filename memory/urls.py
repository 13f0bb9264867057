from django.urls import path

from memory import ask_views, curation_views, study_views, switch_views, views, worker_views

app_name = "memory"

urlpatterns = [
    path("", views.knowledge, name="knowledge"),
    path("measures", views.measures, name="measures"),
    path("reembedding", views.reembedding_progress, name="reembedding"),
    path("document", views.document, name="document"),
    path("document/edit", views.document_editor, name="document-editor"),
    path("document/save", views.save_document, name="save-document"),
    path("teach", views.teach, name="teach"),
    path("waiting", views.waiting, name="waiting"),
    path("waiting/<int:pk>/drop", views.drop_item, name="drop"),
    path("file-now", views.file_now, name="file-now"),
    path("runs/<int:pk>/banner", views.banner, name="banner"),
    path("facts", views.facts, name="facts"),
    path("facts/<int:pk>/forget", views.forget_fact, name="forget-fact"),
    path("facts/<int:pk>/restore", views.restore_fact, name="restore-fact"),
    path("to-settle", views.to_settle, name="to-settle"),
    path("conflicts/<int:pk>/settle", views.settle, name="settle"),
    path("conflicts/<int:pk>/resolve", curation_views.resolve_conflict, name="resolve-conflict"),
    path("pages/<int:pk>/merge", curation_views.merge_pages, name="merge-pages"),
    path("pages/<int:pk>/split", curation_views.split_page, name="split-page"),
    path("facts/<int:pk>/edit", curation_views.edit_fact, name="edit-fact"),
    path("changes", views.changes, name="changes"),
    path("changes/<int:number>/undo", views.undo, name="undo"),
    path("ask", ask_views.ask_or_teach, name="ask"),
    path("ask/facts/<int:pk>/outcome", ask_views.outcome, name="ask-outcome"),
    path("study", study_views.start_study, name="study"),
    path("study/<int:pk>", study_views.study_status, name="study-status"),
    path("first-setup", study_views.first_setup, name="first-setup"),
    # Settings (/settings/) posts here: the kill switches, the document's size, model calls.
    path("switches", switch_views.set_switches, name="switches"),
    path("document-size", switch_views.set_document_size, name="document-size"),
    path("model-routes", worker_views.set_routes, name="model-routes"),
    path("workers", worker_views.workers_region, name="workers"),
]
