"""Microsoft GraphRAG (graphrag 3.3.0) as a peer (fanin.systems.peers, peers/ms_graphrag/): its standard index end to end on the
tiny fixture corpus against a loopback OpenAI-compatible stand-in (canned replies GraphRAG's graph-extraction, gleaning and
community-report prompts parse), queried in local and global mode for its context (not its answer: no answer call). Every unit
maps to a corpus document; a reopened index (a fresh adapter process) returns the same evidence; a unit whose text units lost
their document is counted, never dropped silently; the "fast" (NLP) method says clearly why it cannot run offline; and through the
pipeline a second build replays from the lab's cache with 0 model calls."""
import gzip
import json
import re
import subprocess

import pytest

from fanin.systems.peers import Endpoint, PeerError, PeerSystem, read_lock
from fanin.data.wildgraphbench import WildGraphBench

from openai_standin import StandIn
from test_peers import FIXTURE, built_env  # the shared helpers: the fixture corpus, a peer environment built once (skip if PyPI is unreachable)

Q = "Typhoon Saola brought torrential rain to Taiwan in August 2012"
SAOLA = "nature/Typhoon Saola hits Taiwan"
STOP = {"The", "A", "An", "In", "On", "It", "Its", "This", "That", "After", "By", "At", "Of", "And", "For", "Signal", "No", "Home", "News"}


def names_in(text: str) -> list[str]:
    out = []
    for m in re.findall(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*", text):
        n = " ".join(w for w in m.split() if w not in STOP).upper()
        if len(n) > 2 and n not in out: out.append(n)
    return out


def graphrag_reply(body: dict) -> str:
    """Canned, deterministic replies to graphrag 3.3.0's prompts: graph extraction (GRAPH_EXTRACTION_PROMPT: capitalised phrases of
    the text unit as entities, neighbours related, in its `("entity"<|>...)` / `("relationship"<|>...)` records joined by `##`),
    the gleaning follow-ups (CONTINUE_PROMPT / LOOP_PROMPT), description summaries, and community reports (COMMUNITY_REPORT_PROMPT,
    asked with a json_schema response format: the JSON it names, titled by the community's first entities)."""
    msgs = body.get("messages", [])
    last = msgs[-1]["content"] if msgs else ""
    if "-Real Data-" in last and "Entity_types:" in last:
        text = last.split("-Real Data-")[-1].split("Text:", 1)[-1].split("######################")[0]
        ns = names_in(text)[:8]
        recs = [f'("entity"<|>{n}<|>EVENT<|>{n} appears in the text.)' for n in ns]
        recs += [f'("relationship"<|>{a}<|>{b}<|>{a} and {b} are mentioned together.<|>2)' for a, b in zip(ns, ns[1:])]
        return "\n##\n".join(recs) + "\n<|COMPLETE|>"
    if last.startswith("MANY entities"): return "<|COMPLETE|>"
    if last.startswith("It appears some entities"): return "N"
    if "Description List:" in last:
        return last.split("Entities:")[-1].split("\n")[0].strip() + " is described in the source texts."
    if "# Real Data" in last and "findings" in last:
        data = last.split("# Real Data")[-1].split("-----Entities-----")[-1].split("-----Relationships-----")[0]
        t = " and ".join(e.strip() for e in re.findall(r"^\d+,([^,\n]+),", data, re.M)[:3]) or "community"
        return json.dumps({"title": f"Community of {t}", "summary": f"This community links {t}.", "rating": 2.0,
                           "rating_explanation": "stand-in", "findings": [{"summary": t, "explanation": f"{t} are related."}]})
    return "stand-in answer"


def corpus_nature():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one deliberately unresolved reference
        return WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")


@pytest.fixture(scope="module")
def graphrag_env(): return built_env("ms_graphrag")


def test_the_ms_graphrag_lock_pins_the_peer():
    lk = read_lock("ms_graphrag")
    assert (lk.package, lk.version, lk.python) == ("graphrag", "3.3.0", "3.11")
    names = {r.split("==")[0].lower() for r in lk.requirements}
    assert {"graphrag", "graphrag-llm", "graphrag-vectors", "litellm", "lancedb", "tiktoken", "pandas"} <= names
    assert not names & {"torch", "pip", "setuptools"}
    assert (lk.path.parent / "adapter.py").exists()


def system(s, mode="local", **kw):
    return PeerSystem("ms_graphrag", mode=mode, gateway=Endpoint(s.base_url, "peer-token"), chat_model=s.model, embedding_dim=384, **kw)


def evidence(units): return [(u.doc_id, u.meta["kind"], u.text, u.meta.get("doc_ids")) for u in units]


def test_ms_graphrag_end_to_end(graphrag_env, tmp_path):
    corpus, store = corpus_nature(), tmp_path / "store"
    with StandIn(model="standin-graphrag", reply=graphrag_reply) as s:
        local = system(s)
        try:
            local.index(corpus, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"], meta["mode"]) == ("graphrag", "3.3.0", "local")
            p = meta["peer"]
            assert p["method"] == "standard" and p["n_documents"] == p["docs"] == len(corpus) and p["n_text_units"] >= len(corpus)
            assert p["n_entities"] > 0 and p["n_relationships"] > 0 and p["n_community_reports"] > 0
            assert p["text_units_without_doc"] == p["entities_without_doc"] == p["relationships_without_doc"] == p["communities_without_doc"] == 0
            assert p["docs_without_text_units"] == 0 and p["text_units_with_foreign_doc"] == 0
            assert (store / "peer" / "output" / "text_units.parquet").exists() and (store / "peer" / "output" / "lancedb").is_dir()
            chats = s.chats()
            assert all(c["model"] == s.model for c in chats) and s.embeddings()
            assert all(r["model"] == "all-MiniLM-L6-v2" for r in s.embeddings())
            kinds = [("extract" if "-Real Data-" in c["messages"][-1]["content"] else "glean" if c["messages"][-1]["content"].startswith("MANY")
                      else "report" if "findings" in c["messages"][-1]["content"] else "other") for c in chats]
            assert kinds.count("extract") == p["n_text_units"] and kinds.count("report") == p["n_community_reports"]
            n_chats, n_emb = len(chats), len(s.embeddings())

            units = local.retrieve(Q, 5)
            assert units and [u.rank for u in units] == list(range(1, len(units) + 1))
            kinds = {u.meta["kind"] for u in units}
            assert {"entity", "relationship", "text_unit"} <= kinds <= {"entity", "relationship", "text_unit", "community_report"}
            for u in units:
                assert u.doc_id in corpus and all(d in corpus for d in u.meta.get("doc_ids", []))
                if u.meta["kind"] == "text_unit": assert u.text.strip() in corpus[u.doc_id].text
                if u.meta["kind"] == "entity": assert u.meta["entity"].lower() in " ".join(corpus[d].text.lower() for d in u.meta.get("doc_ids", [u.doc_id]))
            assert next(u for u in units if u.meta["kind"] == "text_unit").doc_id == SAOLA
            assert units[0].meta["kind"] == "entity" and SAOLA in units[0].meta.get("doc_ids", [units[0].doc_id])
            st = local.stats()
            assert st["package"] == "graphrag" and st["version"] == "3.3.0" and st["unmapped_units"] == 0 and st["units"] == len(units)
            assert len(s.chats()) == n_chats and len(s.embeddings()) == n_emb + 1  # a query embeds itself; no answer call
            want_local = evidence(units)
        finally:
            local.close()

        # a fresh adapter process reopens the index: the same evidence in local mode; global gives the community reports
        again = system(s)
        try:
            again.index(corpus, store)
            assert again.stats()["loaded"]
            assert evidence(again.retrieve(Q, 5)) == want_local
        finally:
            again.close()
        glob = system(s, mode="global")
        try:
            glob.index(corpus, store)
            g = glob.retrieve(Q, 5)
            assert g and {u.meta["kind"] for u in g} == {"community_report"} and glob.stats()["unmapped_units"] == 0
            assert all(u.doc_id in corpus and u.meta.get("community") is not None for u in g)
            assert any(u.text.startswith("Community of") for u in g)
        finally:
            glob.close()
        assert len(s.chats()) == n_chats  # reopening and searching (local and global context) make no LLM call

        # a unit whose text units lost their document is counted, not dropped silently: blank one text unit's document_id
        peer = store / "peer"
        subprocess.run([str(graphrag_env.python), "-c", "import pandas as pd, sys; p = sys.argv[1]; t = pd.read_parquet(p); "
                        "t['document_id'] = t['document_id'].where(~t['text'].str.startswith('Typhoon Saola'), ''); t.to_parquet(p)",
                        str(peer / "output" / "text_units.parquet")], check=True)
        broken = system(s)
        try:
            broken.index(corpus, store)
            got = broken.retrieve(Q, 5)
            assert all(u.doc_id in corpus and u.doc_id != SAOLA for u in got)
            assert broken.stats()["unmapped_units"] >= 1 and broken.stats()["unmapped_queries"] == 1
            q = broken.proc.call({"op": "query", "query": Q, "k": 5, "top_k": 5, "mode": "local"})
            assert q["unmapped"] == broken.stats()["unmapped_units"] and any(u["kind"] == "text_unit" and u["unmapped"] for u in q["units"])
            assert broken.proc.call({"op": "load", "workdir": str(peer)})["stats"]["text_units_without_doc"] == 1
        finally:
            broken.close()


def test_ms_graphrag_fast_method_says_why_it_cannot_run_offline(graphrag_env, tmp_path, monkeypatch):
    "GraphRAG's NLP ('fast') graph extraction needs NLTK data that NLTK fetches from GitHub: refused before any model call."
    empty = tmp_path / "nltk_data"
    empty.mkdir()
    monkeypatch.setenv("NLTK_DATA", str(empty))
    r = subprocess.run([str(graphrag_env.python), "-c", "import nltk; nltk.data.find('corpora/brown')"], capture_output=True)
    if r.returncode == 0: pytest.skip("this machine has NLTK's brown corpus in a default folder: the fast method may run here")
    with StandIn(model="standin-graphrag", reply=graphrag_reply) as s:
        fast = system(s, options={"method": "fast"})
        try:
            with pytest.raises(PeerError, match=r"method 'fast'.*NLTK data corpora/brown.*GitHub, not PyPI"):
                fast.index(corpus_nature(), tmp_path / "store")
        finally:
            fast.close()
        assert not s.requests


# ---- through the pipeline: the gateway over the run's LLM, and a rebuild replayed from the lab's cache ----------------------
@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_ms_graphrag_through_the_pipeline_replays_its_build_from_the_lab_cache(graphrag_env, tmp_path):
    """`fanin run system=ms_graphrag` with the run's LLM pointed at the stand-in: the peer's calls land in the lab's LLM cache and
    ledger; the same build in a fresh outputs folder sharing only the LLM cache makes no call to the model server at all."""
    from fanin.doors.cli import main
    from fanin.core.config import resolve_path

    def run(outputs, extra=()):
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={outputs}", "progress=false",
              "experiment_name=test", "system=ms_graphrag", "llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}",
              f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1", *extra]
        try: main(["run", "--stages", "index,retrieve"] + ov)
        except SystemExit as e: return e.code
        return 0

    with StandIn(model="standin-graphrag", reply=graphrag_reply) as s:
        assert run(tmp_path / "a") == 0
        n_chats = len(s.chats())
        assert n_chats > 0 and len(s.embeddings()) == 0  # embeddings come from the lab's embedder
        (meta_path,) = (tmp_path / "a").rglob("index.json")
        meta = json.loads(meta_path.read_text())
        assert meta["package"] == "graphrag" and meta["peer"]["text_units_without_doc"] == 0 and meta["peer"]["n_community_reports"] > 0
        (packs,) = (tmp_path / "a").rglob("packs.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(packs.read_bytes()).decode().splitlines() if line.strip()]
        docs = set(corpus_nature().ids)
        assert rows and any(r["units"] for r in rows) and all(u["doc_id"] in docs for r in rows for u in r["units"])
        (ledger,) = (tmp_path / "a").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] > 0 and {(r["stage"], r["system"]) for r in led["by_stage_system"]} >= {("index", "ms_graphrag")}
        # the same build elsewhere, sharing only the LLM cache: every peer call is a cache hit
        assert run(tmp_path / "b", [f"paths.llm_cache={tmp_path / 'a' / 'llm_cache' / 'llm.sqlite'}"]) == 0
        assert len(s.chats()) == n_chats and len(s.embeddings()) == 0, "a rebuild from the lab's cache reached the model server"
        (ledger,) = (tmp_path / "b").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] == 0 and led["failures"] == 0 and led["cache_hits"] == led["requests"] > 0
        (meta_b,) = (tmp_path / "b").rglob("index.json")
        pb = json.loads(meta_b.read_text())["peer"]
        assert {k: pb[k] for k in ("n_text_units", "n_entities", "n_relationships", "n_community_reports")} == \
               {k: meta["peer"][k] for k in ("n_text_units", "n_entities", "n_relationships", "n_community_reports")}
