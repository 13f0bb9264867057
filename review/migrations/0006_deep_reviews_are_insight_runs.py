# A Deep review becomes an insight run of kind "deep_review" (its row and lease): every Deep
# review is copied into the insight runs' table, keeping its memory, state, report, who asked
# and when, and the old table is dropped. A review still running keeps running, unclaimed, with
# its lease counted from when it started; of two running for one memory (nothing stopped that
# before) the older is settled as lost.

from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

LEASE = timedelta(minutes=15)  # review.insight.LEASE when this was written
LOST = (
    "The review was lost (its worker stopped before it finished); a new one can be started "
    "from the Knowledge tab."
)


def copy_deep_reviews(apps, schema_editor):
    DeepReview = apps.get_model("review", "DeepReview")
    InsightRun = apps.get_model("review", "InsightRun")
    running_for = set()
    for review in DeepReview.objects.order_by("-started_at", "-pk"):
        state, finished_at, report = review.state, review.finished_at, review.report
        if state == "running" and review.memory_id in running_for:
            state, finished_at, report = "failed", timezone.now(), LOST
        elif state == "running":
            running_for.add(review.memory_id)
        InsightRun.objects.create(
            kind="deep_review",
            memory_id=review.memory_id,
            state=state,
            report=report,
            requested_by_id=review.requested_by_id,
            started_at=review.started_at,
            finished_at=finished_at,
            lease_expires_at=review.started_at + LEASE,
        )
    _checked_now(schema_editor)


def copy_them_back(apps, schema_editor):
    DeepReview = apps.get_model("review", "DeepReview")
    InsightRun = apps.get_model("review", "InsightRun")
    reviews = InsightRun.objects.filter(kind="deep_review")
    for run in reviews.order_by("started_at", "pk"):
        DeepReview.objects.create(
            memory_id=run.memory_id,
            state=run.state,
            report=run.report,
            requested_by_id=run.requested_by_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )
    reviews.delete()
    _checked_now(schema_editor)


def _checked_now(schema_editor):
    """The rows written are checked now, not at commit: PostgreSQL alters no table (the index
    and the columns below) with checks still pending on it."""
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0025_labelling_rules"),
        ("review", "0005_insight_runs_name_their_executor"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="insightrun",
            name="one_running_insight_run_per_memory",
        ),
        migrations.AddField(
            model_name="insightrun",
            name="kind",
            field=models.CharField(
                choices=[("insight", "insight run"), ("deep_review", "Deep review")],
                default="insight",
                max_length=11,
            ),
        ),
        migrations.AddField(
            model_name="insightrun",
            name="requested_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(copy_deep_reviews, copy_them_back),
        migrations.AddConstraint(
            model_name="insightrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "running")),
                fields=("memory", "kind"),
                name="one_running_insight_run_of_a_kind_per_memory",
            ),
        ),
        migrations.DeleteModel(
            name="DeepReview",
        ),
        migrations.CreateModel(
            name="DeepReview",
            fields=[],
            options={
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("review.insightrun",),
        ),
    ]
