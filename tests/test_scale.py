"""The scaling bench's parts: perturbed copies that keep token offsets, the replicated parse, growth exponents, and the
approximate window index (faiss IVF / HNSW) that `dense` switches to past `ann.min_windows`, held against exact search."""
import numpy as np
import pytest

from fanin.doors.scale import (base_of, copy_id, growth_exponent, perturb_text, project, replicate_corpus, scale_fits, skip_reason)
from fanin.core.schema import Corpus, Document
from fanin.systems.flat import index_kind, window_index
from fanin.core.text import TOKEN_RE


def test_copies_differ_in_tokens_but_keep_offsets():
    t = "Constantinople fell in 1453; the Ottoman army under Mehmed II breached the Theodosian walls after a long siege."
    copies = [perturb_text(t, c, key="k") for c in range(4)]
    assert copies[0] == t and len(set(copies)) == 4 and all(len(x) == len(t) for x in copies)
    starts = lambda s: [m.start() for m in TOKEN_RE.finditer(s)]
    assert all(starts(x) == starts(t) for x in copies)
    x = replicate_corpus(Corpus("c", [Document(id="a", title="A", text=t)]), 3)
    assert [d.id for d in x] == ["a", copy_id("a", 1), copy_id("a", 2)] and base_of(copy_id("a", 2)) == ("a", 2)


def test_growth_exponent_fits_and_projects():
    assert growth_exponent([1e3, 1e4, 1e5], [1.0, 10.0, 100.0]) == pytest.approx(1.0)
    assert project([1e3, 1e4], [2.0, 8.0], 1e6) == pytest.approx(8.0 * 100 ** np.log10(4))
    rows = [{"system": "s", "passages": p, "index_s": p / 100, "index_bytes": p, "peak_mb": 100.0, "p50_ms": 1.0, "p95_ms": 2.0}
            for p in (1000, 10000)]
    fits = {f["metric"]: f for f in scale_fits(rows)}
    assert fits["index_s"]["exponent"] == pytest.approx(1.0) and fits["peak_mb"]["exponent"] == pytest.approx(0.0)
    assert "build" in skip_reason("s", 10**7, rows, mem_mb=1e9, max_index_s=60)


def _clustered(n, dim=64, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(8, n // 200), dim))
    v = centres[rng.integers(0, len(centres), n)] + 0.3 * rng.standard_normal((n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_window_index_keeps_exact_top_k(kind):
    vecs = _clustered(20000)
    rng = np.random.default_rng(1)   # queries near stored vectors, as a question is near its passages
    q = vecs[rng.integers(0, len(vecs), 200)] + 0.05 * rng.standard_normal((200, 64)).astype(np.float32)
    exact = window_index(vecs, 64, {"min_windows": 10**9})
    ann = window_index(vecs, 64, {"min_windows": 10000, "kind": kind, "nprobe": 48, "ef_search": 128})
    assert index_kind(exact) == "exact" and index_kind(ann) == kind
    _, e = exact.search(q, 10)
    _, a = ann.search(q, 10)
    overlap = np.mean([len(set(x) & set(y)) / 10 for x, y in zip(e, a)])
    assert overlap >= 0.95, overlap


def test_an_unknown_index_kind_is_refused():
    with pytest.raises(ValueError, match="ivf, hnsw"):
        window_index(_clustered(100), 64, {"min_windows": 10, "kind": "lsh"})


def test_the_exact_reference_is_exact_search(tmp_path):
    "`exact_overlap` holds an approximate dense index against exact search, never against another approximate index."
    from fanin.run.components import load_dataset
    from fanin.core.config import compose, instantiate, k_for
    from fanin.doors.scale import exact_overlap
    cfg = compose(["dataset=authtrace_tiny", "system=dense", "ann.min_windows=1", "ann.kind=hnsw", f"paths.outputs={tmp_path}",
                   "progress=false"])
    ds = load_dataset(cfg)
    domain = ds.domains[0]
    corpus = ds.corpus(domain)
    approx = instantiate(cfg.system)
    approx.index(corpus, tmp_path / "approx")
    assert approx.stats()["window_index"] == "hnsw"
    insts = ds.instances(domain)[:4]
    k = lambda i: k_for(cfg, i.qtype, ds.broad_qtypes)
    tops = [[u.meta.get("chunk", u.doc_id) for u in approx.retrieve(i.query, k(i), i)] for i in insts]
    row = exact_overlap(cfg.system, {}, corpus, insts, tops, k, tmp_path)
    assert 0 < row["ann_overlap"] <= 1 and row["exact_index_s"] > 0
