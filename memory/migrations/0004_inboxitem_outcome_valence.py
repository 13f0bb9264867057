from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_from_the_fact(apps, schema_editor):
    """Items already waiting take the outcome and valence their fact was taught with."""
    InboxItem = apps.get_model("memory", "InboxItem")
    Fact = apps.get_model("knowledge", "Fact")
    fact = Fact.objects.filter(pk=OuterRef("fact_id"))
    InboxItem.objects.filter(fact__isnull=False).update(
        outcome=Subquery(fact.values("outcome")[:1]),
        valence=Subquery(fact.values("valence")[:1]),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0003_brief"),
    ]

    operations = [
        migrations.AddField(
            model_name="inboxitem",
            name="outcome",
            field=models.BooleanField(
                blank=True, help_text="The outcome the teacher reported with it, if any.", null=True
            ),
        ),
        migrations.AddField(
            model_name="inboxitem",
            name="valence",
            field=models.CharField(
                choices=[("fact", "Fact"), ("failure", "Failure")], default="fact", max_length=8
            ),
        ),
        migrations.RunPython(copy_from_the_fact, migrations.RunPython.noop, elidable=True),
    ]
