from django.urls import path

from review import api

app_name = "review-api"

urlpatterns = [
    path("findings/", api.findings, name="findings"),
    path("findings/<int:pk>/not-a-problem", api.not_a_problem, name="not-a-problem"),
    path("findings/<int:pk>/fixed", api.fixed, name="fixed"),
    path("rules/", api.rules, name="rules"),
    path("rules/<int:pk>", api.rule, name="rule"),
    path("guesses/", api.guesses, name="guesses"),
    path("guesses/<int:pk>/answer", api.answer, name="answer"),
    path("guesses/<int:pk>/dismiss", api.dismiss, name="dismiss"),
    path("status/", api.sensors, name="status"),
    path("timeline/", api.timeline, name="timeline"),
    path("events/", api.house_events, name="events"),
]
