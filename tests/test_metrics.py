"Document-level evidence metrics on hand-made packs."
import math

import pandas as pd

from fanin.metrics import aggregate, evidence_metrics, fan_in_tables
from fanin.schema import Instance, Pack, Unit

G2 = Instance(id="q", dataset="t", query="?", qtype="multi-fact", gold_docs=["a", "b"], fan_in=2)
BINS = [{"name": "single", "lo": 1, "hi": 1}, {"name": "low", "lo": 2, "hi": 2}, {"name": "high", "lo": 3, "hi": None}]


def pack(*docs):
    return Pack(instance_id="q", system="s", units=[Unit(doc_id=d, text="x" * 10, score=1.0, rank=r) for r, d in enumerate(docs, 1)])


def test_partial_pack():
    m = evidence_metrics(pack("a", "c", "d"), G2)
    assert m["er"] == 0.5 and m["ep"] == 1 / 3 and m["hit"] == 0.0 and m["pack_chars"] == 30


def test_duplicate_units_cost_precision_not_recall():
    m = evidence_metrics(pack("a", "a", "c"), G2)
    assert m["er"] == 0.5 and m["ep"] == 2 / 3 and m["pack_docs"] == 2


def test_empty_pack_has_zero_recall_and_undefined_precision():
    m = evidence_metrics(pack(), G2)
    assert m["er"] == 0.0 and math.isnan(m["ep"]) and m["hit"] == 0.0 and m["pack_units"] == 0


def test_unknown_documents_are_non_gold_and_counted():
    m = evidence_metrics(pack("a", "ghost"), G2, known_docs={"a", "b"})
    assert m["ep"] == 0.5 and m["unknown_units"] == 1


def test_full_coverage_is_a_hit():
    assert evidence_metrics(pack("b", "a"), G2)["hit"] == 1.0


def test_no_gold_is_undefined_not_zero():
    q = Instance(id="q", dataset="t", query="?", qtype="single-fact", fan_in=0)
    m = evidence_metrics(pack("a"), q)
    assert math.isnan(m["er"]) and math.isnan(m["ep"]) and math.isnan(m["hit"])


def test_aggregation_skips_and_counts_undefined():
    q1 = Instance(id="r", dataset="t", query="?", qtype="single-fact", gold_docs=["a"], fan_in=1)
    df = pd.DataFrame([evidence_metrics(pack("a"), q1), evidence_metrics(pack(), q1), evidence_metrics(pack("a", "b"), G2)])
    t = fan_in_tables(df, BINS)["by_fan_in_bin"].set_index("fan_in_bin")
    assert t.loc["single", "questions"] == 2 and t.loc["single", "er"] == 0.5
    assert t.loc["single", "ep"] == 1.0 and t.loc["single", "n_ep"] == 1
    assert t.loc["low", "hit"] == 1.0
    assert aggregate(df, ["qtype"]).set_index("qtype").loc["multi-fact", "questions"] == 1
