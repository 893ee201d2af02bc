"""system.backend=bm25s: the same chunks and tokens scored by bm25s; a reopened index keeps its backend (recorded in the
index's data file) and ranks the same; the default stays rank-bm25."""
import warnings

import pytest

from fanin.config import compose
from fanin.systems import BM25System, read_json

from conftest import FIXTURE


def corpus():
    from fanin.wildgraphbench import WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")


def test_bm25s_backend_reopens_with_its_backend(tmp_path):
    c = corpus()
    q = "Typhoon Saola rain Taiwan"
    built = BM25System(backend="bm25s").index(c, tmp_path / "s")
    assert read_json(tmp_path / "s" / "bm25_tokens.json.gz")["backend"] == "bm25s"
    again = BM25System(backend="bm25s").index(c, tmp_path / "s")
    assert again.stats()["loaded"] and again.retrieve(q, 3) == built.retrieve(q, 3)
    assert type(again.bm25).__name__ == "Bm25sScorer"
    okapi = BM25System().index(c, tmp_path / "r")
    assert type(okapi.bm25).__name__ == "BM25Okapi" and okapi.retrieve(q, 1)[0].doc_id == built.retrieve(q, 1)[0].doc_id


def test_the_default_backend_is_rank_bm25():
    assert compose(["system=bm25"]).system.backend == "rank_bm25"
    with pytest.raises(ValueError, match="backend must be one of"):
        BM25System(backend="elastic")
