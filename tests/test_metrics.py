"Document-level evidence metrics on hand-made packs: a unit is credited with the documents whose content it carries."
import math

import pandas as pd
import pytest

from fanin.judging.metrics import aggregate, carried_tokens, carries, evidence_metrics, fan_in_tables, unit_docs
from fanin.core.schema import Corpus, Document, Instance, Pack, Unit

G2 = Instance(id="q", dataset="t", query="?", qtype="multi-fact", gold_docs=["a", "b"], fan_in=2)
BINS = [{"name": "single", "lo": 1, "hi": 1}, {"name": "low", "lo": 2, "hi": 2}, {"name": "high", "lo": 3, "hi": None}]


TEXTS = {d: "x" * 10 for d in "abcd"}   # every unit of `pack` is its page's whole text


def pack(*docs):
    return Pack(instance_id="q", system="s", units=[Unit(doc_id=d, text="x" * 10, score=1.0, rank=r) for r, d in enumerate(docs, 1)])


def _metrics(p, inst, known=TEXTS, **kw):
    return evidence_metrics(p, inst, known, **kw)


def test_partial_pack():
    m = _metrics(pack("a", "c", "d"), G2)
    assert m["er"] == 0.5 and m["ep"] == 1 / 3 and m["hit"] == 0.0 and m["pack_chars"] == 30


def test_duplicate_units_cost_precision_not_recall():
    m = _metrics(pack("a", "a", "c"), G2)
    assert m["er"] == 0.5 and m["ep"] == 2 / 3 and m["pack_docs"] == 2


def test_empty_pack_has_zero_recall_and_undefined_precision():
    m = _metrics(pack(), G2)
    assert m["er"] == 0.0 and math.isnan(m["ep"]) and m["hit"] == 0.0 and m["pack_units"] == 0


def test_unknown_documents_are_non_gold_and_counted():
    m = _metrics(pack("a", "ghost"), G2, {"a": "x" * 10, "b": "x" * 10})
    assert m["ep"] == 0.5 and m["unknown_units"] == 1


def test_full_coverage_is_a_hit():
    assert _metrics(pack("b", "a"), G2)["hit"] == 1.0


def test_no_gold_is_undefined_not_zero():
    q = Instance(id="q", dataset="t", query="?", qtype="single-fact", fan_in=0)
    m = _metrics(pack("a"), q)
    assert math.isnan(m["er"]) and math.isnan(m["ep"]) and math.isnan(m["hit"])


def test_aggregation_skips_and_counts_undefined():
    q1 = Instance(id="r", dataset="t", query="?", qtype="single-fact", gold_docs=["a"], fan_in=1)
    df = pd.DataFrame([_metrics(pack("a"), q1), _metrics(pack(), q1), _metrics(pack("a", "b"), G2)])
    t = fan_in_tables(df, BINS)["by_fan_in_bin"].set_index("fan_in_bin")
    assert t.loc["single", "questions"] == 2 and t.loc["single", "er"] == 0.5
    assert t.loc["single", "ep"] == 1.0 and t.loc["single", "n_ep"] == 1
    assert t.loc["low", "hit"] == 1.0
    assert aggregate(df, ["qtype"]).set_index("qtype").loc["multi-fact", "questions"] == 1


PAGES = {
    "vicente": "Typhoon Vicente made landfall in Guangdong in July 2012. The Hong Kong Observatory raised the Hurricane Signal "
               "No. 10 as Typhoon Vicente approached, the first time since 1999. Over 130 people were injured in the city.",
    "saola": "Typhoon Saola brought torrential rain to Taiwan in early August 2012. Landslides closed mountain roads and "
             "more than 600 millimetres of rain fell in Yilan County within two days.",
    "bolaven": "Typhoon Bolaven crossed the Korean Peninsula at the end of August 2012, cutting power to nearly two million "
               "homes in South Jeolla and sinking two fishing boats off Jeju.",
}
SEASON = Instance(id="s", dataset="t", query="Which storms hit in 2012?", qtype="multi-fact", gold_docs=["vicente", "saola"], fan_in=2)


def summary(text, docs=("vicente", "saola", "bolaven")):
    return Unit(doc_id=docs[0], text=text, score=1.0, rank=1, meta={"doc_ids": list(docs)})


def test_a_summary_is_credited_only_with_the_pages_it_carries():
    u = summary("The Hong Kong Observatory raised the Hurricane Signal No. 10 as Typhoon Vicente approached; "
                "Typhoon Saola brought torrential rain to Taiwan, where landslides closed mountain roads.")
    assert unit_docs(u) == ["vicente", "saola", "bolaven"]          # cited
    assert unit_docs(u, PAGES) == ["vicente", "saola"]             # carried: Bolaven is only listed
    m = evidence_metrics(Pack(instance_id="s", system="raptor", units=[u]), SEASON, PAGES)
    assert (m["er"], m["ep"], m["hit"], m["pack_docs"]) == (1.0, 1.0, 1.0, 2)
    assert (m["er_cited"], m["ep_cited"], m["hit_cited"], m["pack_docs_cited"]) == (1.0, 2 / 3, 1.0, 3)


def test_a_summary_that_names_pages_without_their_content_earns_no_recall():
    u = summary("Summary: Vicente; Saola; Bolaven; typhoons; 2012; damage; rain; power.")
    m = evidence_metrics(Pack(instance_id="s", system="raptor", units=[u]), SEASON, PAGES)
    assert m["er"] == 0.0 and m["ep"] == 0.0 and m["units_uncarried"] == 1
    assert m["er_cited"] == 1.0 and m["hit_cited"] == 1.0          # the cited reading would call this pack perfect


def test_the_threshold_grows_with_the_unit_and_has_a_floor():
    page = PAGES["vicente"]
    phrase = "the Hong Kong Observatory raised the Hurricane Signal"    # 8 words of the page, the floor exactly
    short = "In short: " + phrase + "."
    c, n = carried_tokens(short, page)
    assert (c, n) == (8, 10) and carries(short, page) and not carries(short, page, min_tokens=9)
    long = short + " " + " ".join(f"word{i}" for i in range(200))       # 210 tokens: 5 % is 10.5 > 8 carried
    assert carried_tokens(long, page)[0] == 8 and not carries(long, page)
    assert carries(long, page, min_share=0.03)                          # a documented parameter


def test_chunks_slices_and_whole_pages_keep_their_document():
    corpus = Corpus("t", [Document(id=k, title=k.title(), text=v) for k, v in PAGES.items()])
    units = [Unit(doc_id="vicente", text=PAGES["vicente"][20:90], score=1, rank=1),          # a chunk
             Unit(doc_id="saola", text="Saola\n" + PAGES["saola"][:60], score=1, rank=2),     # the long-context slice: title + text
             Unit(doc_id="bolaven", text=PAGES["bolaven"], score=1, rank=3)]                   # the oracle's page
    assert [unit_docs(u, corpus) for u in units] == [["vicente"], ["saola"], ["bolaven"]]
    m = evidence_metrics(Pack(instance_id="s", system="bm25", units=units), SEASON, corpus)
    assert (m["er"], m["ep"]) == (m["er_cited"], m["ep_cited"]) == (1.0, 2 / 3)


def test_a_set_of_ids_cannot_measure_content():
    with pytest.raises(TypeError, match="texts"):
        evidence_metrics(pack("a"), G2, {"a", "b"})
    with pytest.raises(TypeError, match="texts"):
        evidence_metrics(pack("a"), G2)


def test_tables_carry_the_cited_reading_beside():
    u = summary("Summary: Vicente; Saola; Bolaven; typhoons; 2012; damage; rain; power.")
    df = pd.DataFrame([evidence_metrics(Pack(instance_id="s", system="raptor", units=[u]), SEASON, PAGES)])
    t = fan_in_tables(df, BINS)["overall"].iloc[0]
    assert (t.er, t.er_cited, t.ep, t.ep_cited, t.hit_cited) == (0.0, 1.0, 0.0, 2 / 3, 1.0)
    old = df.drop(columns=["er_cited", "ep_cited", "hit_cited"])          # a table made before the cited columns existed
    assert "er_cited" not in fan_in_tables(old, BINS)["overall"].columns
