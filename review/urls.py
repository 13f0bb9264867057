from django.urls import path

from review import views

app_name = "review"

urlpatterns = [
    path("", views.findings, name="findings"),
    path("badge", views.badge, name="badge"),
    path("rules", views.rules, name="rules"),
    path("timeline", views.timeline, name="timeline"),
    path("deep-review", views.start_deep_review, name="deep-review"),
    path("deep-review/<int:pk>", views.deep_review_status, name="deep-review-status"),
    path("<int:pk>/not-a-problem", views.not_a_problem, name="not-a-problem"),
    path("<int:pk>/fixed", views.mark_fixed, name="mark-fixed"),
    path("guesses/<int:pk>/answer", views.answer_guess, name="answer-guess"),
    path("guesses/<int:pk>/dismiss", views.dismiss_guess, name="dismiss-guess"),
    path("rules/<int:pk>/remove", views.remove_rule, name="remove-rule"),
]
