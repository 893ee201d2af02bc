"""BM25's two backends: bm25s (the default backend; method=okapi gives rank-bm25's scores) and rank-bm25 (`system=bm25`, the
papers' library); a reopened index keeps its backend (recorded in its `bm25/bm25.json`) and ranks the same: bm25s's saved
matrix, memory-mapped, gives the built scorer's rankings and scores on every real WildGraphBench domain."""
import warnings

import numpy as np
import pytest

from fanin.core.config import compose
from fanin.systems.flat import BM25System, read_json

from conftest import FIXTURE


def corpus():
    from fanin.data.wildgraphbench import WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")


def test_bm25s_backend_reopens_with_its_backend(tmp_path):
    c = corpus()
    q = "Typhoon Saola rain Taiwan"
    built = BM25System(backend="bm25s").index(c, tmp_path / "s")
    assert read_json(tmp_path / "s" / "bm25" / "bm25.json")["backend"] == "bm25s"
    again = BM25System(backend="bm25s").index(c, tmp_path / "s")
    assert again.stats()["loaded"] and again.retrieve(q, 3) == built.retrieve(q, 3)
    assert type(again.bm25).__name__ == "Bm25sScorer"
    assert isinstance(again.bm25.model.scores["data"], np.memmap)   # mapped from disk, not read
    okapi = BM25System(backend="rank_bm25").index(c, tmp_path / "r")
    assert type(okapi.bm25).__name__ == "BM25Okapi" and okapi.retrieve(q, 1)[0].doc_id == built.retrieve(q, 1)[0].doc_id


def test_the_default_backend_is_rank_bm25():
    assert compose(["system=bm25"]).system.backend == "rank_bm25"
    with pytest.raises(ValueError, match="backend must be one of"):
        BM25System(backend="elastic")


def test_bm25s_okapi_scores_are_rank_bm25s():
    "bm25s with method=okapi (the default backend) gives rank-bm25's scores: the same rankings, not a near relative."
    import numpy as np
    from rank_bm25 import BM25Okapi
    from fanin.systems.flat import Bm25sScorer, chunk_corpus
    from fanin.core.text import lexical_tokens
    c = corpus()
    toks = [lexical_tokens(c[x.doc_id].text[x.start:x.end]) for x in chunk_corpus(c, 200, 20)]
    okapi, ours, lucene = BM25Okapi(toks), Bm25sScorer(toks, 1.5, 0.75), Bm25sScorer(toks, 1.5, 0.75, method="lucene")
    for q in ("Typhoon Saola rain Taiwan", "the storm and the wind of the year", "rain rain Taiwan"):
        qt = lexical_tokens(q)
        assert np.allclose(ours.get_scores(qt), okapi.get_scores(qt), rtol=1e-9, atol=1e-9), q
    qt = lexical_tokens("Typhoon Saola rain Taiwan")
    assert not np.allclose(lucene.get_scores(qt), okapi.get_scores(qt))   # bm25s's own idf is a different scoring
    assert compose(["system=bm25s"]).system.method == "okapi" and BM25System().backend == "bm25s"


def test_real_data_saved_bm25s_index_ranks_as_built_on_every_domain(real_data_root, tmp_path):
    """On each of the 12 domains (the lab's chunks and tokens), bm25s's index saved and loaded back memory-mapped gives the top
    10 units and scores of the scorer before saving, exactly, for a sample of the domain's questions; and rank-bm25's scores."""
    from rank_bm25 import BM25Okapi
    from fanin.core.text import lexical_tokens
    from fanin.data.wildgraphbench import DOMAINS, WildGraphBench
    from fanin.systems.flat import bm25_from_tokens, chunk_corpus, load_bm25, save_bm25, top_k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = WildGraphBench(real_data_root)
    for d in DOMAINS:
        c = ds.corpus(d)
        toks = [lexical_tokens(c[x.doc_id].text[x.start:x.end]) for x in chunk_corpus(c, 1200, 100)]
        built = bm25_from_tokens(toks)
        loaded = load_bm25(save_bm25(tmp_path / d, toks, bm25=built))
        assert isinstance(loaded.model.scores["data"], np.memmap) and loaded.n == built.n and loaded.idf == built.idf, d
        okapi = BM25Okapi(toks)
        qs = ds.instances(d)
        for q in qs[:: max(1, len(qs) // 6)]:
            qt = lexical_tokens(q.query)
            want, got = top_k(built.get_scores(qt), 10), top_k(loaded.get_scores(qt), 10)
            assert (want[0] == got[0]).all() and (want[1] == got[1]).all(), (d, q.id)
            assert np.allclose(loaded.get_scores(qt), okapi.get_scores(qt), rtol=1e-9, atol=1e-9), (d, q.id)
