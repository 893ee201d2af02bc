"""HippoRAG 2 (hipporag 2.0.0a4) as a peer (fanin.systems.peers, peers/hipporag/), on a CPU: end to end on the tiny fixture corpus
against a loopback OpenAI-compatible stand-in (canned replies in HippoRAG's own formats: named entities, triples, the recognition
memory's fact filter). Its pinned environment is CPU only (torch's CPU build; no vLLM, whose import the adapter stands in for,
and no nvidia-* libraries), so it stays small enough for `make test`; the index folder holds
no pickle; every unit maps to a corpus document; a reopened index (a fresh adapter process, the graph rebuilt from HippoRAG's
JSON and parquet files) returns the same evidence without an indexing call; mode `dpr` is its dense passage retrieval."""
import json
import os
import re
import signal
import time

import pytest

from fanin.systems.peers import Endpoint, PeerSystem, read_lock

from openai_standin import StandIn
from test_peer_mem0 import Q, SAOLA, corpus_nature
from test_peers import built_env


def alive(pid: int) -> bool:
    "Whether `pid` runs (a zombie waiting for its parent to reap it counts as gone)."
    try: return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError: return False


def entities(text: str) -> list[str]:
    "Capitalised words and runs of them, in order, at most 8: the stand-in's named entities."
    return list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*", text)))[:8]


def hippo_reply(body: dict) -> str:
    """Canned replies to hipporag 2.0.0a4's three prompts: NER (its system prompt asks for named entities), triple extraction
    (the user turn carries the passage's `{"named_entities": [...]}`; consecutive entities become a triple) and the recognition
    memory's DSPy filter (`[[ ## fact_before_filter ## ]]`; the first four candidate facts are kept)."""
    msgs = body.get("messages", [])
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    last = msgs[-1]["content"] if msgs else ""
    if "[[ ## fact_before_filter ## ]]" in last:
        facts = json.loads(last.split("[[ ## fact_before_filter ## ]]", 1)[1].split("Respond with", 1)[0].strip())["fact"]
        return "[[ ## fact_after_filter ## ]]\n" + json.dumps({"fact": facts[:4]}) + "\n\n[[ ## completed ## ]]"
    if system.startswith("Your task is to extract named entities"):
        return json.dumps({"named_entities": entities(last)})
    m = re.search(r'\{"named_entities": (\[.*?\])\}', last, re.S)
    if m:
        ents = json.loads(m.group(1))
        return json.dumps({"triples": [[a, "is mentioned with", b] for a, b in zip(ents, ents[1:])]})
    return "{}"


@pytest.fixture(scope="module")
def hipporag_env(): return built_env("hipporag")


def test_the_hipporag_lock_pins_the_peer():
    lk = read_lock("hipporag")
    assert (lk.package, lk.version, lk.python) == ("hipporag", "2.0.0a4", "3.11")
    names = {r.split("==")[0].lower().replace("_", "-") for r in lk.requirements}
    assert {"hipporag", "openai", "torch", "python-igraph", "pyarrow", "pandas"} <= names
    # CPU only: no vLLM (its GPU-only offline mode is never used), no CUDA libraries; torch is the lab's own CPU build
    assert "vllm" not in names and not {n for n in names if n.startswith("nvidia-") or n in ("triton", "xformers", "ray")}
    assert "torch==2.13.0" in lk.requirements
    assert "openai==1.91.0" in lk.requirements          # hipporag's own pin (1.91.1) is not on the registry: the lock says so
    assert (lk.path.parent / "adapter.py").exists()


def test_hipporag_end_to_end_on_a_cpu(hipporag_env, tmp_path):
    corpus, store = corpus_nature(), tmp_path / "store"
    with StandIn(model="standin-hipporag", reply=hippo_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        make = lambda mode: PeerSystem("hipporag", mode=mode, gateway=gw, chat_model=s.model, embedding_dim=384)
        h = make("full")
        try:
            h.index(corpus, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"], meta["mode"]) == ("hipporag", "2.0.0a4", "full")
            p = meta["peer"]
            assert p["n_chunks"] == len(corpus) and p["empty_docs"] == 0   # the fixture's pages are one passage each
            assert p["entities"] > 0 and p["facts"] > 0 and p["graph_edges"] > 0
            assert not list(store.rglob("*.pickle"))                         # the lab's index folder holds no pickle
            n_index = len(s.chats())
            assert n_index == 2 * len(corpus)                                # NER and triples, one call each per passage
            assert {r["model"] for r in s.embeddings()} == {"text-embedding-all-MiniLM-L6-v2"}
            units = h.retrieve(Q, 3)
            assert len(units) == 3 and [u.rank for u in units] == [1, 2, 3]
            assert all(u.doc_id in corpus and u.meta["kind"] == "passage" for u in units)
            assert units[0].doc_id == SAOLA and units[0].text.startswith(corpus[SAOLA].title)
            assert h.stats()["unmapped_units"] == 0
            assert len(s.chats()) == n_index + 1                             # recognition memory: one filter call per query
            # hipporag forks a multiprocessing Manager at import: it dies with the adapter, even when the adapter is SIGKILLed
            pid = h.proc.proc.pid
            kids = [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
            assert kids
            os.kill(pid, signal.SIGKILL)
            h.proc.proc.wait(10)
            deadline = time.time() + 10
            while any(alive(k) for k in kids) and time.time() < deadline: time.sleep(0.1)
            assert not any(alive(k) for k in kids), "a process the adapter forked outlived it"
        finally:
            h.close()
        again = make("full")
        try:
            again.index(corpus, store)
            assert again.stats()["loaded"]
            got = again.retrieve(Q, 3)
            assert [(u.doc_id, u.text) for u in got] == [(u.doc_id, u.text) for u in units]
            assert len(s.chats()) == n_index + 2                             # reopening made no indexing call
            assert not list(store.rglob("*.pickle"))
        finally:
            again.close()
        dpr = make("dpr")
        try:
            dpr.index(corpus, store)
            dense = dpr.retrieve(Q, 3)
            assert dense[0].doc_id == SAOLA and all(u.doc_id in corpus for u in dense)
            assert len(s.chats()) == n_index + 2                             # dense passage retrieval calls no LLM
        finally:
            dpr.close()
