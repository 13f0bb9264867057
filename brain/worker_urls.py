"""The worker protocol's addresses (``brain.worker_api``), under ``/api/worker/``."""

from django.urls import path

from brain import worker_api

urlpatterns = [
    path("calls/next", worker_api.NextCall.as_view(), name="worker-next"),
    path("calls/<int:pk>/heartbeat", worker_api.Heartbeat.as_view(), name="worker-heartbeat"),
    path("calls/<int:pk>/answer", worker_api.Answer.as_view(), name="worker-answer"),
]
