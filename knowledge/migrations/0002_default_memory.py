from django.db import migrations


def create_home(apps, schema_editor):
    Memory = apps.get_model("knowledge", "Memory")
    Memory.objects.get_or_create(slug="home", defaults={"name": "Home"})


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [migrations.RunPython(create_home, migrations.RunPython.noop)]
