"""Mem0 (mem0ai 2.2.1) as a peer (fanin.systems.peers, peers/mem0/): end to end on the tiny fixture corpus against a loopback
OpenAI-compatible stand-in (canned replies Mem0's additive fact-extraction prompt parses), in both modes: raw (infer=False, the
passages verbatim) and infer (the LLM rewrites passages into facts). Every unit maps to a corpus document; a reopened index (a
fresh adapter process) returns the same evidence; a memory without a source document is counted, never dropped silently; and through
the pipeline a second build replays from the lab's cache with 0 model calls."""
import gzip
import json
import re

import pytest

from fanin.systems.peers import Endpoint, PeerError, PeerSystem, read_lock
from fanin.data.wildgraphbench import WildGraphBench

from openai_standin import StandIn
from test_peers import FIXTURE, built_env  # the shared helpers: the fixture corpus, a peer environment built once (skip if PyPI is unreachable)

Q = "Typhoon Saola brought torrential rain to Taiwan in August 2012"
SAOLA = "nature/Typhoon Saola hits Taiwan"
DATE = "2026-01-01"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def mem0_reply(body: dict) -> str:
    """Canned, deterministic replies to mem0ai 2.2.1's additive extraction (ADDITIVE_EXTRACTION_PROMPT + the user prompt of
    `generate_additive_extraction_prompt`): every sentence of the new message becomes one fact, in its JSON output format
    (`{"memory": [{"id", "text", "attributed_to"}]}`). Anything else gets an empty extraction."""
    msgs = body.get("messages", [])
    last = msgs[-1]["content"] if msgs else ""
    if "## New Messages" in last:
        new = last.split("## New Messages\n", 1)[1].split("\n\n## Observation Date")[0].strip()
        new = re.sub(r"^user: ", "", new)
        return json.dumps({"memory": [{"id": str(i), "text": s, "attributed_to": "user"} for i, s in enumerate(sentences(new))]})
    return json.dumps({"memory": []})


def corpus_nature():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one deliberately unresolved reference
        return WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")


@pytest.fixture(scope="module")
def mem0_env(): return built_env("mem0")


def test_the_mem0_lock_pins_the_peer():
    lk = read_lock("mem0")
    assert (lk.package, lk.version, lk.python) == ("mem0ai", "2.2.1", "3.11")
    names = {r.split("==")[0].lower() for r in lk.requirements}
    assert {"mem0ai", "openai", "qdrant-client"} <= names
    assert not names & {"spacy", "fastembed", "torch"}  # nothing that fetches models beyond PyPI
    assert (lk.path.parent / "adapter.py").exists()


def test_mem0_raw_end_to_end(mem0_env, tmp_path):
    corpus, store = corpus_nature(), tmp_path / "store"
    with StandIn(model="standin-mem0", reply=mem0_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        raw = PeerSystem("mem0", mode="raw", gateway=gw, chat_model=s.model, embedding_dim=384, options={"mode": "raw"})
        try:
            raw.index(corpus, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"], meta["mode"]) == ("mem0ai", "2.2.1", "raw")
            p = meta["peer"]
            assert (p["mode"], p["infer"]) == ("raw", False)
            assert p["n_memories"] == p["passages"] == len(corpus)  # the fixture's documents are one passage each
            assert p["memories_without_doc"] == 0 and p["docs_without_memories"] == 0 and p["memories_with_foreign_doc"] == 0
            assert (store / "peer" / "qdrant").is_dir() and (store / "peer" / "history.db").exists()
            assert not s.chats() and s.embeddings()  # raw: no LLM call, only embeddings
            assert all(r["model"] == "all-MiniLM-L6-v2" for r in s.embeddings())

            units = raw.retrieve(Q, 5)
            assert units and [u.rank for u in units] == list(range(1, len(units) + 1))
            assert {u.meta["kind"] for u in units} == {"passage"}
            for u in units: assert u.doc_id in corpus and u.text == corpus[u.doc_id].text.strip()  # verbatim passages
            assert units[0].doc_id == SAOLA
            assert [u.score for u in units] == sorted((u.score for u in units), reverse=True)
            st = raw.stats()
            assert st["package"] == "mem0ai" and st["version"] == "2.2.1" and st["unmapped_units"] == 0 and st["units"] == len(units)

            # a memory whose source cannot be recovered is counted, not dropped silently: add one without a document id
            r = raw.proc.call({"op": "index", "workdir": str(raw.workdir), "mode": "raw", "options": {"mode": "raw"},
                               "docs": [{"id": d.id, "title": d.title, "text": d.text} for d in corpus] +
                                       [{"id": "", "title": "", "text": "Typhoon Saola rain Taiwan August 2012, from nowhere."}]})
            assert r["stats"]["memories_without_doc"] == 1
            raw._opened = None  # the adapter closed the folder after indexing: reopen it
            got = raw.retrieve(Q, 6)
            assert all(u.doc_id in corpus for u in got)
            assert raw.stats()["unmapped_units"] == 1 and raw.stats()["unmapped_queries"] == 1
            q = raw.proc.call({"op": "query", "query": Q, "k": 6, "top_k": 6, "mode": "raw"})
            assert q["unmapped"] == 1 and [u["text"] for u in q["units"] if u["unmapped"]] == ["Typhoon Saola rain Taiwan August 2012, from nowhere."]
        finally:
            raw.close()

        # a fresh index, reopened by fresh adapter processes: the same evidence, and a query in another mode is refused
        store2 = tmp_path / "store2"
        first = PeerSystem("mem0", mode="raw", gateway=gw, chat_model=s.model, embedding_dim=384, options={"mode": "raw"})
        try:
            first.index(corpus, store2)
            want = [(u.doc_id, u.text, u.score) for u in first.retrieve(Q, 5)]
        finally:
            first.close()
        again = PeerSystem("mem0", mode="raw", gateway=gw, chat_model=s.model, embedding_dim=384, options={"mode": "raw"})
        try:
            again.index(corpus, store2)
            assert again.stats()["loaded"]
            assert [(u.doc_id, u.text, u.score) for u in again.retrieve(Q, 5)] == want
        finally:
            again.close()
        wrong = PeerSystem("mem0", mode="infer", gateway=gw, chat_model=s.model, embedding_dim=384, options={"mode": "infer"})
        try:
            wrong.index(corpus, store2)
            with pytest.raises(PeerError, match="built in mode 'raw'"):
                wrong.retrieve(Q, 5)
        finally:
            wrong.close()
        assert not s.chats()


def test_mem0_infer_end_to_end(mem0_env, tmp_path):
    corpus, store = corpus_nature(), tmp_path / "store"
    opts = {"mode": "infer", "current_date": DATE}
    with StandIn(model="standin-mem0", reply=mem0_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        inf = PeerSystem("mem0", mode="infer", gateway=gw, chat_model=s.model, embedding_dim=384, options=opts)
        first = []
        try:
            inf.index(corpus, store)
            p = json.loads((store / "index.json").read_text())["peer"]
            assert (p["mode"], p["infer"], p["current_date"]) == ("infer", True, DATE)
            chats = s.chats()
            assert len(chats) == p["passages"] == len(corpus)  # one extraction call per passage
            for c in chats:
                assert c["model"] == s.model and c["response_format"] == {"type": "json_object"} and c["temperature"] == 0
                assert f"## Current Date\n{DATE}" in c["messages"][-1]["content"]  # the pinned date: the prompt repeats, so the lab's cache replays it
            n_facts = sum(len(sentences(d.text)) for d in corpus)
            assert p["n_memories"] == n_facts > len(corpus) and p["memories_without_doc"] == 0 and p["docs_without_memories"] == 0

            units = inf.retrieve(Q, 5)
            assert units and {u.meta["kind"] for u in units} == {"memory"}
            for u in units:  # every fact carries the document of the passage it came from
                assert u.doc_id in corpus and u.text in sentences(corpus[u.doc_id].text)
            assert units[0].doc_id == SAOLA
            assert inf.stats()["unmapped_units"] == 0
            first = [(u.doc_id, u.text, u.score) for u in units]
        finally:
            inf.close()
        n = len(s.chats())
        again = PeerSystem("mem0", mode="infer", gateway=gw, chat_model=s.model, embedding_dim=384, options=opts)
        try:
            again.index(corpus, store)
            assert again.stats()["loaded"]
            assert [(u.doc_id, u.text, u.score) for u in again.retrieve(Q, 5)] == first
        finally:
            again.close()
        assert len(s.chats()) == n  # reopening and searching make no LLM call


# ---- through the pipeline: the gateway over the run's LLM, and a rebuild replayed from the lab's cache ----------------------
@pytest.mark.filterwarnings("ignore:WildGraphBench")
@pytest.mark.parametrize("mode", ["raw", "infer"])
def test_mem0_through_the_pipeline_replays_its_build_from_the_lab_cache(mode, mem0_env, tmp_path):
    """`fanin run system=mem0` with the run's LLM pointed at the stand-in: the peer's calls land in the lab's LLM cache and ledger;
    the same build in a fresh outputs folder sharing only the LLM cache makes no call to the model server at all."""
    from fanin.doors.cli import main
    from fanin.core.config import resolve_path

    def run(outputs, extra=()):
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={outputs}", "progress=false",
              "experiment_name=test", "system=mem0", f"system.mode={mode}", f"system.options.current_date={DATE}", "llm=vllm",
              f"llm.base_url={s.base_url}", f"llm.model={s.model}", f"embedder.model_dir={resolve_path('outputs/models')}",
              "embedder.threads=1", *extra]
        try: main(["run", "--stages", "index,retrieve"] + ov)
        except SystemExit as e: return e.code
        return 0

    with StandIn(model="standin-mem0", reply=mem0_reply) as s:
        assert run(tmp_path / "a") == 0
        n_chats = len(s.chats())
        assert (n_chats > 0) == (mode == "infer") and len(s.embeddings()) == 0  # embeddings come from the lab's embedder
        (meta_path,) = (tmp_path / "a").rglob("index.json")
        meta = json.loads(meta_path.read_text())
        assert meta["package"] == "mem0ai" and meta["peer"]["mode"] == mode and meta["peer"]["memories_without_doc"] == 0
        (packs,) = (tmp_path / "a").rglob("packs.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(packs.read_bytes()).decode().splitlines() if line.strip()]
        docs = set(corpus_nature().ids)
        assert rows and any(r["units"] for r in rows) and all(u["doc_id"] in docs for r in rows for u in r["units"])
        (ledger,) = (tmp_path / "a").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        if mode == "infer":
            assert led["calls"] > 0 and {(r["stage"], r["system"]) for r in led["by_stage_system"]} >= {("index", "mem0")}
        # the same build elsewhere, sharing only the LLM cache: every peer call is a cache hit
        assert run(tmp_path / "b", [f"paths.llm_cache={tmp_path / 'a' / 'llm_cache' / 'llm.sqlite'}"]) == 0
        assert len(s.chats()) == n_chats and len(s.embeddings()) == 0, "a rebuild from the lab's cache reached the model server"
        (ledger,) = (tmp_path / "b").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] == 0 and led["failures"] == 0
        if mode == "infer": assert led["cache_hits"] == led["requests"] > 0
        (meta_b,) = (tmp_path / "b").rglob("index.json")
        assert json.loads(meta_b.read_text())["peer"]["n_memories"] == meta["peer"]["n_memories"]
