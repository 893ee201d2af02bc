"""embedder=openai_compatible: the faults an embedding server has (a flaky one retried, a broken one stopped with URL, model and
status), a dense index built through `fanin run` from a stand-in server, and a second run that sends nothing (the cache)."""
import pytest

from fanin.models.endpoint_embeddings import EmbeddingEndpointError, OpenAICompatibleEmbedder
from fanin.models.llm import EndpointError

from conftest import FIXTURE
from openai_standin import StandIn


def test_a_flaky_server_is_retried_and_a_broken_one_named():
    with StandIn(embed_errors=[503, 500]) as s:
        e = OpenAICompatibleEmbedder(s.base_url, "bge-small", max_retries=2)
        v = e.encode(["a green hulk", "a hammer"])
        assert v.shape == (2, 384) and abs(float((v[0] ** 2).sum()) - 1) < 1e-5 and e.dim == 384
    with StandIn(embed_errors=[500] * 10) as s:
        e = OpenAICompatibleEmbedder(s.base_url, "bge-small", max_retries=1)
        with pytest.raises(EndpointError, match=r"bge-small.*HTTP 500"):
            e.encode(["x"])
        n = len(s.embeddings())
        with pytest.raises(EndpointError):
            e.encode(["y"])
        assert len(s.embeddings()) == n, "a failed preflight is remembered, not retried per batch"
    with StandIn() as s:
        e = OpenAICompatibleEmbedder(s.base_url, "bge-small", dim=768)
        with pytest.raises(EndpointError, match="embedder.dim=384"):
            e.encode(["x"])
    with StandIn() as s:
        e = OpenAICompatibleEmbedder(s.base_url, "bge-small", api_key_env="FANIN_TEST_NO_SUCH_KEY")
        with pytest.raises(EndpointError, match="FANIN_TEST_NO_SUCH_KEY"):
            e.encode(["x"])


def test_a_batch_failing_after_the_preflight_raises_naming_the_server():
    with StandIn() as s:
        e = OpenAICompatibleEmbedder(s.base_url, "bge-small", max_retries=0, batch_size=1)
        e.preflight()
        s.embed_errors.extend([502])
        with pytest.raises(EmbeddingEndpointError, match=r"127\.0\.0\.1.*'bge-small'.*HTTP 502"):
            e.encode(["one", "two"])


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_dense_through_an_endpoint_and_then_from_the_cache(tmp_path):
    import json
    from fanin.run.pipeline import run
    with StandIn() as s:
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.cache={tmp_path / 'cache'}", "progress=false", "experiment_name=test",
              "system=dense", "embedder=openai_compatible", f"embedder.base_url={s.base_url}", "embedder.model=hashed-words", "embedder.batch_size=16"]
        (f,) = run(ov + [f"paths.outputs={tmp_path / 'a'}"])
        sent = sum(len(r["input"]) for r in s.embeddings())
        (meta,) = (tmp_path / "a").rglob("index.json")
        info = json.loads(meta.read_text())
        assert info["embedder"] == "openai-compatible:hashed-words" and info["misses"] > 0 and sent >= info["misses"]
        n = len(s.embeddings())
        (g,) = run(ov + [f"paths.outputs={tmp_path / 'b'}"])          # a fresh index and run, the same embedding cache
        from fanin.data.wildgraphbench import WildGraphBench
        queries = {i.query for i in WildGraphBench(FIXTURE, domains=["nature"]).instances()}
        again = [t for r in s.embeddings()[n:] for t in r["input"]]
        assert again and set(again) <= queries | {"dimension probe"}, "a window embedded before was sent again"
