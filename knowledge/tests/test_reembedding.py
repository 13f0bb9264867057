from knowledge import reembedding, retrieval
from knowledge.embedding import get_embedder
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement


def test_changing_the_embedder_re_embeds_every_fact_and_search_uses_only_current_vectors(
    home, settings
):
    fact = learn(
        Statement.typed(memory=home, text="The garage freezer is off in winter.", origin="typed")
    ).fact
    assert fact.embedder == "hash-ngram-v1"
    settings.BRAIN_EMBEDDER = "minilm"
    # Full text still finds it.
    assert retrieval.retrieve(memory=home, question="winter freezer", reader=SYSTEM)

    assert reembedding.stale_facts().count() == 1
    done = reembedding.reembed_stale()

    fact.refresh_from_db()
    assert done == 1
    assert fact.embedder == get_embedder().name == "minilm-int8-v1"
    assert reembedding.stale_facts().count() == 0
    assert Fact.objects.get(pk=fact.pk).embedding is not None
