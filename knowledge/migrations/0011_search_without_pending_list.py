"""The full-text and trigram indexes without a pending list, and each memory's facts newest first.

A GIN index with ``fastupdate`` (PostgreSQL's default) puts new entries in an unsorted pending
list, merged into the index only when the list reaches ``gin_pending_list_limit`` (4 MB) or
vacuum runs; every search reads the whole list row by row. 4 MB is tens of thousands of facts:
in a memory of 10k facts taught since the last vacuum, every full-text search of ``context()``
read all of them (11.9 ms of a statement that takes 0.9 ms once the list is merged). A memory
is read far more often than it is taught, and a fact's entries written straight into the index
cost a fraction of a millisecond, so the indexes are kept without one. The lists already there
are merged here.

Full text ranks a tier's newest matches (``knowledge/search.py``). For a common word the
planner walks the primary key backwards and stops at the first matches; with only the primary
key it walked every newer row of every other memory first (37 ms in a 10k memory beside a 100k
one, 7.8 ms on (memory, id)).
"""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models

INDEXES = {
    "fact": ["fact_search_vector", "fact_text_trgm"],
    "procedure": ["procedure_search_vector"],
}
NAMES = [name for names in INDEXES.values() for name in names]

FORWARD = "\n".join(
    f"ALTER INDEX {name} SET (fastupdate = off); SELECT gin_clean_pending_list('{name}'::regclass);"
    for name in NAMES
)
BACKWARD = "\n".join(f"ALTER INDEX {name} RESET (fastupdate);" for name in NAMES)


def _index(name: str, *, fastupdate: bool | None) -> GinIndex:
    fields = {"fact_text_trgm": ["text"]}.get(name, ["search_vector"])
    opclasses = ["gin_trgm_ops"] if name == "fact_text_trgm" else []
    return GinIndex(fields=fields, opclasses=opclasses, name=name, fastupdate=fastupdate)


def _state(fastupdate: bool | None) -> list:
    return [
        operation
        for model, names in INDEXES.items()
        for name in names
        for operation in (
            migrations.RemoveIndex(model_name=model, name=name),
            migrations.AddIndex(model_name=model, index=_index(name, fastupdate=fastupdate)),
        )
    ]


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0010_subject_slices")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=_state(fastupdate=False),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(fields=["memory", "-id"], name="fact_memory_id"),
        ),
    ]
