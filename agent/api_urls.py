from django.urls import path

from agent import api

app_name = "agent-api"

urlpatterns = [
    path("episodes/", api.episodes, name="episodes"),
    path("episodes/distil", api.distil, name="distil"),
    path("procedures/", api.procedures, name="procedures"),
    path("procedures/<int:pk>/outcome", api.procedure_outcome, name="procedure-outcome"),
    path("agent/sleep", api.sleep, name="sleep"),
    path("agent/decay", api.decay, name="decay"),
    path("agent/prune", api.prune, name="prune"),
    path("agent/retrieve", api.retrieve, name="retrieve"),
    path("agent/outcome", api.outcome, name="outcome"),
    path("agent/stats", api.stats, name="stats"),
    path("agent/core", api.core, name="core"),
]
