"""Where evidence is lost (fanin.results.diagnosis): hand-made cases where the losing step is known by construction, one per step and
per paradigm family (chunks, entity graph, router, a system that cannot say); the sum property (the pack-side steps add up to
1 - ER in every system x bin cell) on real pipeline runs; the end-to-end command on the fixture."""
import math

import pandas as pd
import pytest

from fanin.results.diagnosis import PACK_STEPS, attribute, diagnose, loss_table
from fanin.judging.metrics import evidence_metrics
from fanin.core.schema import Corpus, Document, Instance, Pack
from fanin.systems.flat import BM25System, ClosedBookSystem, LongContextSystem, System, loss

CORPUS = Corpus("toy", [
    Document(id="lennon", title="John Lennon", text="John Lennon was born in Liverpool. Lennon wrote songs with Paul McCartney. " * 4),
    Document(id="liverpool", title="Liverpool", text="Liverpool is a city in England. It lies on the River Mersey near the sea. " * 4),
    Document(id="paris", title="Paris", text="Paris is the capital of France, and Berlin is the capital of Germany. " * 4),
    Document(id="blank", title="Blank", text="   "),
])


def ask(query, gold, fan_in=None):
    return Instance(id="q", dataset="toy", domain="toy", query=query, qtype="multi-fact", gold_docs=gold, fan_in=fan_in or len(gold))


def steps(system, inst, units, shown=None):
    return {r["doc_id"]: r for r in attribute(system, Pack(instance_id="q", system=system.name, units=units), inst, CORPUS, shown)}


def test_chunks_each_step_by_construction():
    bm = BM25System(chunk_tokens=30, chunk_overlap=0).index(CORPUS)
    inst = ask("Lennon Liverpool songs", ["lennon", "liverpool", "paris", "blank"])
    got = steps(bm, inst, bm.retrieve(inst.query, 1))
    assert "lennon" not in got                                             # the one unit of the pack carries it
    assert got["liverpool"]["step"] == "ranked_out" and got["liverpool"]["rank"] > 1
    assert got["liverpool"]["closest"].startswith("Liverpool is a city")   # its best chunk: what came closest
    assert got["paris"]["step"] == "unreachable"                           # no word of the question in it
    assert got["paris"]["closest"].startswith("Paris is the capital")       # its own chunk, never reached
    assert got["blank"]["step"] == "not_indexed"                           # no wording: no chunk
    got = steps(bm, inst, [u for u in bm.retrieve(inst.query, 50) if u.score > 0], shown=1)
    assert got["liverpool"]["step"] == "cut"                               # in the pack, past the one unit the reader saw


def test_long_context_and_closed_book_never_indexed():
    lc = LongContextSystem(budget_chars=300).index(CORPUS)
    assert steps(lc, ask("?", ["paris"]), lc.retrieve("?", 5))["paris"]["step"] == "not_indexed"
    cb = ClosedBookSystem().index(CORPUS)
    assert steps(cb, ask("?", ["lennon"]), [])["lennon"]["how"].startswith("closed book")


def test_entity_graph_unreachable_with_hops_and_not_indexed():
    from fanin.systems.graphs import EntityGraphSystem
    g = EntityGraphSystem(method="graal").index(CORPUS)
    got = steps(g, ask("Paul McCartney", ["liverpool", "paris", "blank"]), [])
    assert got["liverpool"]["step"] == "unreachable" and got["liverpool"]["hops"] == 2.0      # McCartney - Lennon - Liverpool
    assert got["paris"]["hops"] == math.inf and got["blank"]["step"] == "not_indexed"           # another component; no entity


def test_router_loses_a_page_its_route_never_reaches():
    from fanin.systems.router import RouterSystem

    class Always:   # a fan-in estimate that sends every question coarse-to-fine
        def predict_proba(self, qs): return [1.0 for _ in qs]

    fine = BM25System("fine", chunk_tokens=30, chunk_overlap=0)
    coarse = BM25System("coarse", chunk_tokens=30, chunk_overlap=0)
    r = RouterSystem(fine, coarse, dataset=None, coarse_k=1)
    r.corpus, r.clf = CORPUS, Always()
    fine.index(CORPUS); coarse.index(CORPUS)
    got = r.locate("Lennon Liverpool songs", ["liverpool"])
    assert got["liverpool"]["step"] == "unreachable" and got["liverpool"]["how"].startswith("router")
    assert r.locates


def test_a_system_that_cannot_say_is_unknown_never_folded():
    class Peer(System):
        name = "peer"
        def retrieve(self, query, k, instance=None): return []
    got = steps(Peer().index(CORPUS), ask("?", ["lennon", "paris"]), [])
    assert {r["step"] for r in got.values()} == {"unknown"}

    class Liar(System):   # says it locates, and answers a step outside the contract
        name, locates = "liar", True
        def locate(self, query, docs, instance=None): return {d: {"step": "lost", "how": ""} for d in docs}
    with pytest.raises(ValueError, match="expected one pack-side step"):
        steps(Liar().index(CORPUS), ask("?", ["lennon"]), [])
    with pytest.raises(ValueError, match="not_indexed"):
        loss("lost")


def test_shares_add_up_to_the_missed_share():
    bm = BM25System(chunk_tokens=30, chunk_overlap=0).index(CORPUS)
    rows, mets = [], []
    for i, (q, gold, k) in enumerate([("Lennon songs", ["lennon", "liverpool"], 1), ("capital France", ["paris"], 1),
                                      ("Mersey", ["liverpool", "lennon", "paris"], 2)]):
        inst = Instance(id=f"q{i}", dataset="toy", domain="toy", query=q, qtype="multi-fact", gold_docs=gold, fan_in=len(gold))
        pack = Pack(instance_id=inst.id, system="bm25", units=bm.retrieve(q, k))
        rows += attribute(bm, pack, inst, CORPUS)
        mets.append({**evidence_metrics(pack, inst, CORPUS), "status": "ok"})
    from fanin.core.config import compose
    t = loss_table(pd.DataFrame(rows), pd.DataFrame(mets), compose([]).fan_in_bins, n_boot=20)
    for _, cell in t.groupby(["system", "fan_in_bin"]):
        assert math.isclose(cell[cell.step.isin(PACK_STEPS)].share.sum(), cell.missed.iloc[0], abs_tol=1e-12)


def test_diagnose_end_to_end_on_the_fixture(tiny_overrides):
    from fanin.run.pipeline import run
    ov = tiny_overrides + ["systems=[bm25,long_context,oracle,closed_book]"]
    run(ov)
    tabs = diagnose(ov, n_boot=50, log=lambda *_: None)
    loss_t = tabs["loss"]
    assert set(loss_t.system) == {"bm25", "long_context", "oracle", "closed_book"}
    assert (loss_t[loss_t.step == "unknown"].share == 0).all()          # the lab's own systems leave nothing unknown
    for _, cell in loss_t.groupby(["system", "fan_in_bin"]):
        assert math.isclose(cell[cell.step.isin(PACK_STEPS)].share.sum(), 1 - cell.er.iloc[0], abs_tol=1e-9)
    cb = loss_t[(loss_t.system == "closed_book") & (loss_t.step == "not_indexed")]
    assert (cb.share == cb.missed).all() and (cb.missed == 1).all()      # every page of an empty pack: never indexed
    assert "oracle" not in set(tabs["headroom"].system)                  # a ceiling, not a choice
    out = [p for p in tiny_overrides if p.startswith("paths.outputs=")][0].split("=", 1)[1]
    from pathlib import Path
    assert (Path(out) / "figures" / "test_loss.png").exists() and (Path(out) / "tables" / "test_radius.csv").exists()
    again = diagnose(ov, n_boot=50, log=lambda *_: None)                  # loss.csv reused: the same table
    pd.testing.assert_frame_equal(again["loss"], loss_t)
    import json
    meta = json.loads((Path(out) / "tables" / "test_diagnosis.json").read_text())
    assert meta["pairs"] > 0 and set(meta["run_seconds"]) == {"bm25", "long_context", "oracle", "closed_book"}
    from fanin.results.diagnosis import explain
    from fanin.run.components import load_dataset
    from fanin.run.pipeline import system_configs
    inst = next(i for i in load_dataset(system_configs(ov)[0]).instances() if i.gold_docs)
    one = explain(inst.id, ov)
    assert set(one.system) == {"bm25", "long_context", "oracle", "closed_book"} and set(one.gold_page) == set(inst.gold_docs)
    assert (one[one.system == "closed_book"].step == "not_indexed").all() and (one[one.system == "oracle"].step == "in the pack").all()
    ranked = one[one.step == "ranked_out"]
    assert (ranked.closest.str.len() > 0).all()                          # each ranked-out page shows its closest unit
    with pytest.raises(KeyError, match="not a question"):
        explain("no-such-question", ov)


def test_fanin_plan_counts_the_diagnosis(tiny_overrides):
    from fanin.run.plan import plan
    p = plan(tiny_overrides + ["systems=[bm25,dense]"], ["diagnose"])
    rows = p.rows[p.rows.stage == "diagnose"]
    assert set(rows.system) == {"dense"} and (rows.kind == "embed").all() and rows.basis.str.startswith("upper bound").all()
    from fanin.run.components import load_dataset
    from fanin.run.pipeline import system_configs
    assert rows.requests.sum() == len(load_dataset(system_configs(tiny_overrides)[0]).instances())   # one query embedding per question at most


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_diagnose_asks_the_runs_llm_again_for_community_global(tiny_overrides):
    """Community global search rates its candidate reports with the LLM, and so does its diagnosis. With the run's LLM pointed at
    a loopback stand-in (a report that quotes its sentences, one fixed rating; communities of two, as the fixture's small graph
    has no larger ones), `fanin diagnose` starts that LLM, every rating
    replays from the run's cache (the stand-in sees no new call), and every miss is attributed, none `unknown`."""
    import json
    from openai_standin import StandIn
    from fanin.run.pipeline import run

    def reply(body):
        text = body["messages"][-1]["content"]
        return json.dumps({"score": 50}) if "Report:" in text else text.split("Sentences:", 1)[-1].strip()[:600]

    with StandIn(model="standin-community", reply=reply) as s:
        ov = tiny_overrides + ["system=community_global", "system.min_size=2", "llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}"]
        run(ov)
        calls = len(s.chats())
        tabs = diagnose(ov, n_boot=20, log=lambda *_: None)
        assert calls > 0 and len(s.chats()) == calls
    t = tabs["loss"]
    assert set(t.system) == {"community_global"} and (t[t.step == "unknown"].share == 0).all()
    for _, cell in t.groupby(["system", "fan_in_bin"]):
        assert math.isclose(cell[cell.step.isin(PACK_STEPS)].share.sum(), 1 - cell.er.iloc[0], abs_tol=1e-9)
