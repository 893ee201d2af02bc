"""Peers (fanin.peers): real packages in their own pinned environments, driven as JSONL subprocesses. An environment that cannot be
built is reported with pip's words and the peer's name; nano-graphrag runs end to end on the tiny fixture corpus against a loopback
OpenAI-compatible stand-in (canned replies its extraction prompts parse), and every unit it returns maps to a corpus document."""
import json
import re
import urllib.request
from pathlib import Path

import pytest

from fanin.peers import ENV_MARKER, TIKTOKEN_FILES, Endpoint, PeerEnvError, PeerSystem, default_envs, peer_env, read_lock
from fanin.wildgraphbench import WildGraphBench

from openai_standin import StandIn

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "wildgraphbench_tiny"


# ---- environments that cannot be built --------------------------------------------------------------------------------
def test_an_environment_that_cannot_be_built_says_which_peer_and_why(tmp_path, monkeypatch):
    import sys
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"# peer: fanin-no-such-peer==0.0.0\n# python: {sys.version_info[0]}.{sys.version_info[1]}\nfanin-no-such-peer==0.0.0\n")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline and fast: pip may look at no index
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(PeerEnvError) as e:
        peer_env("ghost", lock=lock, envs=tmp_path / "envs", log=lambda m: None)
    msg = str(e.value)
    assert e.value.peer == "ghost" and "peer 'ghost'" in msg
    assert "fanin-no-such-peer==0.0.0" in msg and "No matching distribution" in msg  # pip's own words
    (env,) = [p for p in (tmp_path / "envs").iterdir() if p.is_dir()]
    assert not (env / ENV_MARKER).exists()  # not marked finished: the next call tries again


def test_a_lock_must_pin_exact_versions(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# peer: x==1\n# python: 3.11\nx==1\nnumpy>=1.26\n")
    with pytest.raises(PeerEnvError, match=r"peer 'x'.*'numpy>=1.26' is not an exact pin"):
        read_lock("x", lock=lock)
    lock.write_text("x==1\n")
    with pytest.raises(PeerEnvError, match="names no `# peer: package==version` line"):
        read_lock("x", lock=lock)


def test_the_repository_locks_pin_the_peer():
    lk = read_lock("nano_graphrag")
    assert (lk.package, lk.version, lk.python) == ("nano-graphrag", "0.0.8.2", "3.11")
    assert "nano-graphrag==0.0.8.2" in lk.requirements and "openai" in {r.split("==")[0] for r in lk.requirements}


# ---- nano-graphrag end to end -----------------------------------------------------------------------------------------
STOP = {"The", "A", "An", "In", "On", "It", "Its", "This", "That", "After", "By", "At", "Of", "And", "For", "Signal", "No", "Home", "News"}


def nano_reply(body: dict) -> str:
    """Canned, deterministic replies to nano-graphrag 0.0.8.2's prompts: entity extraction (capitalised phrases of the chunk as
    entities, neighbours related, in its tuple format), the gleaning follow-ups, a community report and a global-map answer (JSON)."""
    msgs = body.get("messages", [])
    last = msgs[-1]["content"] if msgs else ""
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    if "-Real Data-" in last and "Entity_types:" in last:
        text = last.split("-Real Data-")[-1].split("Text:", 1)[-1].split("######################")[0]
        names = []
        for m in re.findall(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*", text):
            n = " ".join(w for w in m.split() if w not in STOP)
            if len(n) > 2 and n not in names: names.append(n)
        recs = [f'("entity"<|>"{n}"<|>"EVENT"<|>"{n} appears in the text.")' for n in names[:8]]
        recs += [f'("relationship"<|>"{a}"<|>"{b}"<|>"{a} and {b} are mentioned together."<|>2)' for a, b in zip(names[:8], names[1:8])]
        return "##".join(recs) + "<|COMPLETE|>"
    if last.startswith("MANY entities were missed"): return "<|COMPLETE|>"
    if last.startswith("It appears some entities"): return "NO"
    if "# Real Data" in last and "community" in last.lower():
        ents = re.findall(r"^\d+,([^,]+),", last.split("-----Entities-----")[-1], re.M)
        title = " and ".join(e.strip().strip('"') for e in ents[:2]) or "Community"
        return json.dumps({"title": title, "summary": f"A community around {title}.", "rating": 5.0, "rating_explanation": "stand-in",
                           "findings": [{"summary": title, "explanation": f"{title} are linked."}]})
    if '"points"' in system:
        return json.dumps({"points": [{"description": f"The reports bear on: {last[:80]}", "score": 5}]})
    return "Stand-in answer."


def pypi_unreachable() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/nano-graphrag/", timeout=15).read(100)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


@pytest.fixture(scope="module")
def nano_env():
    "The nano-graphrag environment (built once under outputs/peers/envs/, reused by later runs); PyPI is needed only to build it."
    lk = read_lock("nano_graphrag")
    built = (default_envs() / f"nano_graphrag-{lk.sha}" / ENV_MARKER).exists()
    have_tk = all((default_envs().parent / "tiktoken" / f).exists() for f in TIKTOKEN_FILES)
    if not (built and have_tk):
        why = pypi_unreachable()
        if why: pytest.skip(f"the nano-graphrag environment is not built and PyPI is unreachable ({why}): it cannot be built here")
    return peer_env("nano_graphrag")


def test_nano_graphrag_end_to_end(nano_env, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one deliberately unresolved reference
        corpus = WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")
    store = tmp_path / "store"
    with StandIn(model="standin-nano", reply=nano_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        local = PeerSystem("nano_graphrag", mode="local", gateway=gw, chat_model=s.model, embedding_dim=384)
        try:
            local.index(corpus, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"]) == ("nano-graphrag", "0.0.8.2")
            assert meta["peer"]["n_chunks"] == len(corpus) and meta["peer"]["n_entities"] > 0 and meta["peer"]["n_communities"] > 0
            assert meta["peer"]["docs_without_chunks"] == 0 and meta["peer"]["chunks_without_doc"] == 0
            assert (store / "peer" / "doc_map.json").exists() and (store / "peer" / "kv_store_text_chunks.json").exists()
            index_chats = len(s.chats())
            assert index_chats > 0 and s.embeddings()

            q = "Typhoon Saola brought torrential rain to Taiwan in August 2012"
            units = local.retrieve(q, 5)
            assert units and [u.rank for u in units] == list(range(1, len(units) + 1))
            kinds = {u.meta["kind"] for u in units}
            assert {"entity", "chunk"} <= kinds, kinds
            for u in units:  # every unit maps to corpus documents; summary-like ones list all they summarise
                assert u.doc_id in corpus and all(d in corpus for d in u.meta.get("doc_ids", [u.doc_id]))
            saola = "nature/Typhoon Saola hits Taiwan"
            assert any(u.meta["kind"] == "chunk" and u.doc_id == saola and u.text == corpus[saola].text.strip() for u in units)
            # the units are what the package itself would read: its own context text (only_need_context=True) holds every chunk
            ctx = local.proc.call({"op": "query", "query": q, "k": 5, "top_k": 5, "mode": "local", "context": True})["context"]
            for u in units:
                if u.meta["kind"] == "chunk": assert u.text.replace('"', '""')[:60] in ctx or u.text[:60] in ctx

            st = local.stats()
            assert st["package"] == "nano-graphrag" and st["version"] == "0.0.8.2" and st["env_setup_seconds"] >= 0
            assert st["unmapped_units"] == 0 and st["queries"] == 1 and st["units"] == len(units)
            assert len(s.chats()) == index_chats  # local search reads the index: no chat call at query time
        finally:
            local.close()

        # the same index, opened by fresh processes, in the other modes
        for mode in ("naive", "global", "local"):
            sysm = PeerSystem("nano_graphrag", mode=mode, gateway=gw, chat_model=s.model, embedding_dim=384)
            try:
                sysm.index(corpus, store)
                assert sysm.stats()["loaded"]
                got = sysm.retrieve(q, 5)
                assert got, mode
                assert all(u.doc_id in corpus and all(d in corpus for d in u.meta.get("doc_ids", [])) for u in got)
                assert sysm.stats()["unmapped_units"] == 0
                if mode == "naive":
                    assert {u.meta["kind"] for u in got} == {"chunk"} and got[0].doc_id == saola
                if mode == "global":
                    assert {u.meta["kind"] for u in got} == {"analyst_point"} and all(len(u.meta.get("doc_ids", [u.doc_id])) >= 1 for u in got)
                if mode == "local":
                    assert [(u.doc_id, u.text) for u in got] == [(u.doc_id, u.text) for u in units]  # reloaded: the same evidence
            finally:
                sysm.close()
