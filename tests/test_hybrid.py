"""`system=hybrid` through the pipeline on the fixture corpus: its packs are the lab's chunks, each fused from the BM25 and
dense rankings (a unit records both ranks, at least one of them set); it shares the embedding cache with `dense` (built after
hybrid, dense embeds nothing); and the fusion follows the documented formula."""
import gzip
import json

import pytest

from fanin.systems.hybrid import rrf
from fanin.run.pipeline import run

from conftest import FIXTURE


def packs(folder):
    return [json.loads(l) for l in gzip.decompress((folder / "packs.jsonl.gz").read_bytes()).decode().splitlines() if l.strip()]


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_hybrid_fuses_bm25_and_dense_and_shares_their_embeddings(tmp_path):
    from fanin.core.config import resolve_path
    ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path}", "progress=false",
          "experiment_name=test", f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"]
    (h,) = run(ov + ["system=hybrid"])
    from fanin.core.config import compose
    hc = compose(ov + ["system=hybrid"]).system
    w, rk = list(hc.weights), hc.rrf_k
    rows = packs(h)
    assert rows and all(r["units"] for r in rows)
    for r in rows:
        for u in r["units"]:
            m = u["meta"]
            assert {"chunk", "bm25_rank", "dense_rank"} <= set(m) and (m["bm25_rank"] or m["dense_rank"])
        scores = [u["score"] for u in r["units"]]
        assert scores == sorted(scores, reverse=True) and all(0 < s <= (w[0] + w[1]) / (rk + 1) + 1e-12 for s in scores)
    (meta,) = [p for p in tmp_path.rglob("index.json") if "/hybrid-" in str(p)]
    info = json.loads(meta.read_text())
    assert info["n_windows"] > 0 and info["hits"] + info["misses"] == info["n_windows"]
    (d,) = run(ov + ["system=dense"])
    (dmeta,) = [p for p in tmp_path.rglob("index.json") if "/dense-" in str(p)]
    dinfo = json.loads(dmeta.read_text())
    assert dinfo["n_windows"] == info["n_windows"] and dinfo["misses"] == 0, "dense embedded windows hybrid had embedded"
    # the top unit of a hybrid pack is the RRF winner of the two halves' rankings
    r = rows[0]
    top = r["units"][0]["meta"]
    expect = sum(wi / (rk + x) for wi, x in zip(w, (top["bm25_rank"], top["dense_rank"])) if x)
    assert abs(r["units"][0]["score"] - expect) < 1e-9


def test_rrf_weights_and_errors():
    assert [i for i, _ in rrf([[1, 2], [2, 1]], [2.0, 1.0])] == [1, 2]
    with pytest.raises(ValueError, match="2 rankings but 1 weights"):
        rrf([[1], [2]], [1.0])
