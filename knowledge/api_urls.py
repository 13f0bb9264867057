from django.urls import path

from knowledge import api

app_name = "knowledge-api"

urlpatterns = [
    path("facts/", api.fact_list, name="facts"),
    path("facts/<int:pk>/", api.fact_explain, name="fact"),
    path("facts/<int:pk>/outcome", api.fact_outcome, name="outcome"),
    path("context", api.context, name="context"),
    path("sources/", api.new_source, name="sources"),
    path("sources/<int:pk>/compile", api.source_compile, name="source-compile"),
    path("passages/", api.passage_search_view, name="passages"),
]
