"""The llama-index RAPTOR pack (llama-index-packs-raptor 0.4.2) as the lab system `raptor_li` (fanin.systems.peers.PeerSystem): end to end
on the tiny fixture corpus against a loopback OpenAI-compatible stand-in (canned summaries), in both of its retrieval modes; every
unit maps to corpus documents (leaf chunks to their document, summaries to every document they summarise), a reopened index (a
fresh adapter process) returns the same evidence without a model call, and through the pipeline a second build replays from the
lab's cache with 0 calls to the model server."""
import gzip
import json
import warnings
from pathlib import Path

import pytest

from fanin.systems.peers import Endpoint, PeerSystem, read_lock
from fanin.data.wildgraphbench import WildGraphBench

from openai_standin import StandIn
from test_peers import FIXTURE, built_env, names_in

ROOT = Path(__file__).resolve().parents[1]
Q = "Typhoon Saola brought torrential rain to Taiwan in August 2012"
SAOLA = "nature/Typhoon Saola hits Taiwan"


def raptor_reply(body: dict) -> str:
    """A canned, deterministic summary for the pack's tree_summarize prompt (llama-index's "Context information from multiple
    sources is below. ----- {context} ----- ... Query: {summary prompt}"): the capitalised phrases of the context."""
    msgs = body.get("messages", [])
    text = "\n".join(m["content"] for m in msgs if isinstance(m.get("content"), str))
    parts = text.split("---------------------")
    context = parts[1] if len(parts) >= 3 else text
    names = names_in(context)[:12] or ["nothing"]
    return "Summary: " + "; ".join(names) + "."


def corpus():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one deliberately unresolved reference
        return WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")


@pytest.fixture(scope="module")
def raptor_env(): return built_env("raptor_li")


def test_the_raptor_li_lock_pins_the_pack():
    lk = read_lock("raptor_li")
    assert (lk.package, lk.version, lk.python) == ("llama-index-packs-raptor", "0.4.2", "3.11")
    pins = dict(r.split("==") for r in lk.requirements)
    assert pins["llama-index-packs-raptor"] == "0.4.2" and pins["llama-index-core"].startswith("0.13.")
    assert {"llama-index-llms-openai-like", "llama-index-embeddings-openai", "umap-learn", "scikit-learn"} <= set(pins)
    assert "chromadb" not in pins  # the in-memory SimpleVectorStore, persisted to the workdir: no vector-store server
    assert (lk.path.parent / "adapter.py").exists()


def test_raptor_li_end_to_end(raptor_env, tmp_path):
    c = corpus()
    store = tmp_path / "store"
    with StandIn(model="standin-raptor", reply=raptor_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        sysm = PeerSystem("raptor_li", mode="collapsed", gateway=gw, chat_model=s.model, embedding_dim=384)
        first = {}
        try:
            sysm.index(c, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"]) == ("llama-index-packs-raptor", "0.4.2") and meta["env_setup_seconds"] > 0
            p = meta["peer"]
            assert p["n_chunks"] >= len(c) and p["n_summaries"] > 0 and p["levels"] >= 1
            assert p["nodes_without_doc"] == 0 and p["chunks_without_doc"] == 0 and p["docs_without_chunks"] == 0
            assert (store / "peer" / "storage" / "docstore.json").exists() and (store / "peer" / "tree.json").exists()
            index_chats = len(s.chats())
            assert index_chats > 0 and s.embeddings()
            assert all(r["model"] == s.model and 0 < r["max_tokens"] <= 512 for r in s.chats())  # the configured model, a modest budget
            # the lab's document ids never reach a prompt or an embedding (excluded metadata)
            sent = json.dumps(s.requests)
            assert not any(d in sent for d in c.ids if "/" in d), "a lab document id leaked into a model request"

            for mode in ("collapsed", "tree_traversal"):
                sysm.mode = mode
                units = sysm.retrieve(Q, 5)
                assert units and [u.rank for u in units] == list(range(1, len(units) + 1)), mode
                for u in units:  # every unit maps to corpus documents; summaries list every document they summarise
                    assert u.doc_id in c and all(d in c for d in u.meta.get("doc_ids", [u.doc_id])), (mode, u)
                    if u.meta["kind"] == "summary": assert u.text.startswith("Summary: ")
                kinds = {u.meta["kind"] for u in units}
                assert "chunk" in kinds and (mode == "collapsed" or "summary" in kinds), (mode, kinds)
                assert any(u.meta["kind"] == "chunk" and u.doc_id == SAOLA for u in units), mode
                first[mode] = [(u.doc_id, u.meta.get("doc_ids"), u.meta["kind"], u.text) for u in units]
            # the summary over all leaves lists every non-empty document it summarises
            tree = sysm.proc.call({"op": "query", "query": Q, "k": 50, "top_k": 50, "mode": "collapsed"})["units"]
            summaries = [u for u in tree if u["kind"] == "summary"]
            assert summaries and all(u["doc_ids"] and not u["unmapped"] for u in tree)
            assert max(len(u["doc_ids"]) for u in summaries) > 1
            st = sysm.stats()
            assert st["package"] == "llama-index-packs-raptor" and st["unmapped_units"] == 0 and st["queries"] == 2
            assert len(s.chats()) == index_chats  # retrieval reads the index: no chat call at query time
        finally:
            sysm.close()

        # the same index, reopened by a fresh adapter process: the same evidence, and nothing is summarised again
        chats = len(s.chats())
        for mode in ("tree_traversal", "collapsed"):
            again = PeerSystem("raptor_li", mode=mode, gateway=gw, chat_model=s.model, embedding_dim=384)
            try:
                again.index(c, store)
                assert again.stats()["loaded"]
                got = again.retrieve(Q, 5)
                assert [(u.doc_id, u.meta.get("doc_ids"), u.meta["kind"], u.text) for u in got] == first[mode], mode
                assert again.stats()["unmapped_units"] == 0
            finally:
                again.close()
        assert len(s.chats()) == chats


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_raptor_li_through_the_pipeline_replays_its_build_from_the_lab_cache(raptor_env, tmp_path):
    """`fanin run system=raptor_li` with the run's LLM pointed at the stand-in: the peer's summaries go through the lab's gateway
    (cache and ledger) and its embeddings come from the lab's embedder; the same build in a fresh outputs folder that shares only
    the LLM cache makes no call to the model server."""
    from fanin.doors.cli import main
    from fanin.core.config import resolve_path

    def run(outputs, extra=()):
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={outputs}", "progress=false",
              "experiment_name=test", "system=raptor_li", "llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}",
              f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1", *extra]
        try: main(["run", "--stages", "index,retrieve"] + ov)
        except SystemExit as e: return e.code
        return 0

    with StandIn(model="standin-raptor_li", reply=raptor_reply) as s:
        assert run(tmp_path / "a") == 0
        n_chats, n_emb = len(s.chats()), len(s.embeddings())
        assert n_chats > 0 and n_emb == 0  # embeddings come from the lab's embedder, never the model server
        (meta_path,) = (tmp_path / "a").rglob("index.json")
        meta = json.loads(meta_path.read_text())
        assert meta["package"] == "llama-index-packs-raptor" and meta["peer"]["n_summaries"] > 0
        assert meta["peer"]["nodes_without_doc"] == 0
        (packs,) = (tmp_path / "a").rglob("packs.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(packs.read_bytes()).decode().splitlines() if line.strip()]
        docs = set(corpus().ids)
        assert rows and any(r["units"] for r in rows) and all(u["doc_id"] in docs for r in rows for u in r["units"])
        (ledger,) = (tmp_path / "a").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] > 0 and {(r["stage"], r["system"]) for r in led["by_stage_system"]} >= {("index", "raptor_li")}
        # the same build elsewhere, sharing only the LLM cache: every summary is a cache hit (the clustering is seeded)
        assert run(tmp_path / "b", [f"paths.llm_cache={tmp_path / 'a' / 'llm_cache' / 'llm.sqlite'}"]) == 0
        assert len(s.chats()) == n_chats and len(s.embeddings()) == 0, "a rebuild from the lab's cache reached the model server"
        (ledger,) = (tmp_path / "b").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] == 0 and led["cache_hits"] == led["requests"] > 0 and led["failures"] == 0
        (meta_b,) = (tmp_path / "b").rglob("index.json")
        assert json.loads(meta_b.read_text())["peer"]["n_summaries"] == meta["peer"]["n_summaries"]


# ---- a corpus big enough for the pack's clustering (UMAP + GMM run past 11 nodes) ---------------------------------------------
TOPICS = {"storm": "Typhoon Rain Flood Wind Coast Warning", "market": "Stock Market Trade Bank Price Inflation",
          "football": "League Match Goal Coach Stadium Season", "volcano": "Volcano Lava Eruption Ash Crater Magma"}


def topic_corpus():
    from fanin.core.schema import Corpus, Document
    docs = []
    for t, words in TOPICS.items():
        w = words.split()
        for i in range(6):
            docs.append(Document(id=f"{t}/{t} report {i}", text=f"{' '.join(w)} {w[i]} {w[i]}. Report {i} on {t}: {w[(i + 1) % 6]} and {w[(i + 2) % 6]} "
                                                                 f"near Place{t.title()}{i}."))
    return Corpus("topics", docs)


def test_raptor_li_clusters_reproducibly_and_maps_every_summary(raptor_env, tmp_path):
    c = topic_corpus()
    builds = []
    with StandIn(model="standin-raptor", reply=raptor_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        for run in ("a", "b"):
            before = len(s.chats())
            sysm = PeerSystem("raptor_li", mode="collapsed", gateway=gw, chat_model=s.model, embedding_dim=384)
            try:
                sysm.index(c, tmp_path / run)
                p = json.loads((tmp_path / run / "index.json").read_text())["peer"]
                assert p["n_chunks"] == len(c) and p["nodes_without_doc"] == 0 and p["docs_without_chunks"] == 0
                assert p["clusters"] > 3, p  # the leaves were clustered, not lumped together
                nodes = sysm.proc.call({"op": "query", "query": "Volcano eruption ash", "k": 100, "top_k": 100, "mode": "collapsed"})["units"]
                assert len(nodes) == p["n_chunks"] + p["n_summaries"] and not any(u["unmapped"] for u in nodes)
                level1 = [u for u in nodes if u["level"] == 1]
                assert len(level1) > 1 and all(u["doc_ids"] for u in level1)
                # each document under at least one first-level summary; summaries of a topic list that topic's documents
                assert set().union(*(u["doc_ids"] for u in level1)) == set(c.ids)
                assert any(len(u["doc_ids"]) > 1 and len({d.split("/")[0] for d in u["doc_ids"]}) == 1 for u in level1)
                units = sysm.retrieve("Volcano eruption ash", 5)
                assert units and all(u.doc_id in c and all(d in c for d in u.meta.get("doc_ids", [])) for u in units)
                assert sysm.stats()["unmapped_units"] == 0
            finally:
                sysm.close()
            builds.append([r["messages"] for r in s.chats()[before:]])
    assert builds[0] and builds[0] == builds[1]  # the same questions, in the same order: a rebuild replays from the lab's cache


def test_raptor_li_splits_a_long_page_without_nltk_data(raptor_env, tmp_path):
    """A page longer than a chunk goes through llama-index's sentence tokenizer, whose loader also wanted NLTK's stopword list
    (downloaded from GitHub, so missing offline): the first real domain failed with "Resource 'stopwords' not found". The
    adapter hands llama-index the same untrained punkt tokenizer, so a long page splits into several chunks offline."""
    from fanin.core.schema import Corpus, Document
    sentences = " ".join(f"Sentence {i} says that Place{i % 7} lies near River{i % 5}." for i in range(600))
    c = Corpus("long", [Document(id="long/a", title="A long page", text=sentences),
                        Document(id="long/b", title="A short page", text="Place3 is small.")])
    with StandIn(model="standin-raptor", reply=raptor_reply) as s:
        sysm = PeerSystem("raptor_li", mode="collapsed", gateway=Endpoint(s.base_url, "peer-token"), chat_model=s.model, embedding_dim=384)
        try:
            sysm.index(c, tmp_path / "store")
            p = json.loads((tmp_path / "store" / "index.json").read_text())["peer"]
            assert p["n_chunks"] > 2 and p["docs_without_chunks"] == 0
            units = sysm.retrieve("Where is Place3?", 3)
            assert units and all(u.doc_id in c for u in units)
        finally:
            sysm.close()


GMM_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[2])
import adapter  # the adapter's module-level patches, exactly as in a build
import numpy as np
from sklearn.mixture import GaussianMixture
rng = np.random.default_rng(0)
line = 1e6 * (rng.normal(size=(30, 1)) @ rng.normal(size=(1, 10)))  # 30 points on one line: singular covariances on every CPU
try: GaussianMixture(3, random_state=0).fit(line); plain = "fitted"
except ValueError as e: plain = str(e)
labels, n = adapter.rclust.GMM_cluster(line, 0.1)  # the pack's own cluster-count search and final fit
json.dump({"plain": plain, "n": int(n), "labelled": sum(1 for lab in labels if len(lab)), "regularised": adapter.TRACE["regularised"]},
          open(sys.argv[1], "w"))
"""


def test_raptor_li_survives_a_degenerate_clustering(raptor_env, tmp_path):
    """The pack's GMMs fail outright ("ill-defined empirical covariance") when the UMAP coordinates collapse, which depends on the
    CPU's float arithmetic; the adapter refits such a fit with a larger reg_covar. Points on one line make every CPU hit it: sklearn
    alone raises, the pack's clustering through the adapter finishes, labels every point and records each regularised fit."""
    import subprocess
    script, out = tmp_path / "probe.py", tmp_path / "probe.json"
    script.write_text(GMM_PROBE)
    r = subprocess.run([str(raptor_env.python), str(script), str(out), str(ROOT / "peers" / "raptor_li")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())
    assert "ill-defined empirical covariance" in got["plain"]
    assert got["n"] >= 1 and got["labelled"] == 30 and got["regularised"]
    assert all(1e-6 < reg <= 1e-1 for _, reg in got["regularised"])
