"""One Review queue: a conflict and a passage placed on no page are Review items beside the
labelling doubts (a conflict's item points at it), and a conflict may be settled by keeping both
with their dates or by a merged statement. Every conflict still open gets its item, so the queue
holds what the Knowledge tab listed before."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def open_items_for_open_conflicts(apps, schema_editor):
    Conflict = apps.get_model("knowledge", "Conflict")
    ReviewItem = apps.get_model("knowledge", "ReviewItem")
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                memory_id=conflict.memory_id,
                kind="conflict",
                conflict=conflict,
                question=conflict.reason,
                created_at=conflict.created_at,
            )
            for conflict in Conflict.objects.filter(state="open").iterator()
        ],
        batch_size=1000,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0017_passage_label_sets_worked_out_once"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conflict",
            name="merged_into",
            field=models.ForeignKey(
                blank=True,
                help_text="For a merge: the statement a person wrote in place of both sides.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="knowledge.fact",
            ),
        ),
        migrations.AddField(
            model_name="reviewitem",
            name="conflict",
            field=models.ForeignKey(
                blank=True,
                help_text="For a conflict: the two statements to settle.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="review_items",
                to="knowledge.conflict",
            ),
        ),
        migrations.AlterField(
            model_name="conflict",
            name="resolution",
            field=models.CharField(
                blank=True,
                choices=[
                    ("new", "kept the new one"),
                    ("old", "kept the old one"),
                    ("both", "kept both"),
                    ("dated", "kept both, each with its dates"),
                    ("merged", "merged them"),
                ],
                max_length=8,
            ),
        ),
        migrations.AlterField(
            model_name="reviewitem",
            name="kind",
            field=models.CharField(
                choices=[
                    ("labelling", "labelling doubt"),
                    ("conflict", "conflict"),
                    ("unplaced", "a passage placed on no page"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="reviewitem",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "open")),
                fields=("conflict",),
                name="one_open_review_item_per_conflict",
            ),
        ),
        migrations.RunPython(open_items_for_open_conflicts, migrations.RunPython.noop),
    ]
