from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    initial = True

    dependencies = []
    # The extensions every app's tables need (knowledge's vector and trigram columns): stated,
    # so no app's first migration can be planned before them.
    run_before = [("knowledge", "0001_initial")]

    operations = [
        VectorExtension(),
        TrigramExtension(),
        migrations.CreateModel(
            name="WorkerHeartbeat",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("hostname", models.CharField(max_length=255, unique=True)),
                ("seen_at", models.DateTimeField()),
            ],
        ),
    ]
