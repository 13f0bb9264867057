from django.urls import path

from memory import api, bulk_api, curation_api

app_name = "memory-api"

urlpatterns = [
    path("", api.document, name="document"),
    path("voice", api.voice, name="voice"),
    path("add", api.add_memory, name="add"),
    path("add/bulk", bulk_api.add_many, name="add-bulk"),
    path("facts/<int:pk>/forget", api.forget_fact, name="forget-fact"),
    path("inbox", api.inbox, name="inbox"),
    path("inbox/<int:pk>", api.inbox_item, name="inbox-item"),
    path("consolidate", api.consolidate, name="consolidate"),
    path("runs/<int:pk>", api.run, name="run"),
    path("changes", api.changes, name="changes"),
    path("changes/<int:number>/undo", api.undo, name="undo"),
    path("conflicts", api.conflicts, name="conflicts"),
    path("conflicts/<int:pk>/settle", api.settle, name="settle"),
    path("review", curation_api.review_queue, name="review"),
    path("pages/<int:pk>/merge", curation_api.merge_pages, name="merge-pages"),
    path("pages/<int:pk>/split", curation_api.split_page, name="split-page"),
    path("facts/<int:pk>/edit", curation_api.edit_fact, name="edit-fact"),
]
