"""Peers (fanin.systems.peers): real packages in their own pinned environments, driven as JSONL subprocesses. An environment that cannot be
built is reported with pip's words and the peer's name; nano-graphrag runs end to end on the tiny fixture corpus against a loopback
OpenAI-compatible stand-in (canned replies its extraction prompts parse), and every unit it returns maps to a corpus document;
so does LightRAG, in all five of its modes, and a reopened index (a fresh adapter process) returns the same evidence."""
import gzip
import json
import re
import urllib.request
from pathlib import Path

import pytest

from fanin.systems.peers import ENV_MARKER, TIKTOKEN_FILES, Endpoint, PeerEnvError, PeerSystem, default_envs, peer_env, read_lock
from fanin.data.wildgraphbench import WildGraphBench

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
    lk = read_lock("lightrag")
    assert (lk.package, lk.version, lk.python) == ("lightrag-hku", "1.5.7", "3.11")
    assert "lightrag-hku==1.5.7" in lk.requirements and "openai" in {r.split("==")[0] for r in lk.requirements}
    assert (lk.path.parent / "adapter.py").exists()


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


def built_env(name: str):
    "A peer's environment (built once under outputs/peers/envs/, reused by later runs); PyPI is needed only to build it."
    lk = read_lock(name)
    built = (default_envs() / f"{name}-{lk.sha}" / ENV_MARKER).exists()
    have_tk = all((default_envs().parent / "tiktoken" / f).exists() for f in TIKTOKEN_FILES)
    if not (built and have_tk):
        why = pypi_unreachable()
        if why: pytest.skip(f"the {name} environment is not built and PyPI is unreachable ({why}): it cannot be built here")
    return peer_env(name)


@pytest.fixture(scope="module")
def nano_env(): return built_env("nano_graphrag")


@pytest.fixture(scope="module")
def lightrag_env(): return built_env("lightrag")


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


# ---- LightRAG end to end ------------------------------------------------------------------------------------------------
def names_in(text: str) -> list[str]:
    "Capitalised phrases of a text (stop words dropped), in order, once each: the stand-in's 'entities'."
    out = []
    for m in re.findall(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*", text):
        n = " ".join(w for w in m.split() if w not in STOP)
        if len(n) > 2 and n not in out: out.append(n)
    return out


def lightrag_reply(body: dict) -> str:
    """Canned, deterministic replies to lightrag-hku 1.5.7's prompts (lightrag/prompt.py): entity extraction in its delimiter
    format (`entity<|#|>name<|#|>type<|#|>description` and `relation<|#|>src<|#|>tgt<|#|>keywords<|#|>description` rows, one a
    line, then `<|COMPLETE|>`), the gleaning follow-up (nothing more), and keyword extraction (JSON: the query's capitalised phrases
    as both high- and low-level keywords)."""
    msgs = body.get("messages", [])
    last = msgs[-1]["content"] if msgs else ""
    everything = "\n".join(m["content"] for m in msgs if isinstance(m.get("content"), str))
    if "---Input Text---" in last:
        names = names_in(last.split("---Input Text---")[-1].split("```")[1])[:8]
        rows = [f"entity<|#|>{n}<|#|>Event<|#|>{n} appears in the text." for n in names]
        rows += [f"relation<|#|>{a}<|#|>{b}<|#|>{a}, {b}<|#|>{a} and {b} are mentioned together." for a, b in zip(names, names[1:])]
        return "\n".join(rows + ["<|COMPLETE|>"])
    if "Based on the last extraction task" in last: return "<|COMPLETE|>"
    if "expert keyword extractor" in everything:
        names = names_in(everything.split("User Query:")[-1].split("---Output---")[0]) or ["event"]
        return json.dumps({"high_level_keywords": names[:3], "low_level_keywords": names})
    return "Stand-in answer."


def test_lightrag_end_to_end(lightrag_env, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's one deliberately unresolved reference
        corpus = WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature")
    store, q = tmp_path / "store", "Typhoon Saola brought torrential rain to Taiwan in August 2012"
    saola = "nature/Typhoon Saola hits Taiwan"
    with StandIn(model="standin-lightrag", reply=lightrag_reply) as s:
        gw = Endpoint(s.base_url, "peer-token")
        mix = PeerSystem("lightrag", mode="mix", gateway=gw, chat_model=s.model, embedding_dim=384)
        first = {}
        try:
            mix.index(corpus, store)
            meta = json.loads((store / "index.json").read_text())
            assert (meta["package"], meta["version"]) == ("lightrag-hku", "1.5.7") and meta["env_setup_seconds"] > 0
            p = meta["peer"]
            assert p["n_chunks"] == len(corpus) and p["n_entities"] > 0 and p["n_relations"] > 0
            assert p["failed_docs"] == 0 and p["docs_without_chunks"] == 0 and p["chunks_without_doc"] == 0
            # every chunk records its lab document id (inserted with ids=[lab id]); file paths carry it too
            chunks = json.loads((store / "peer" / "kv_store_text_chunks.json").read_text())
            assert {c["full_doc_id"] for c in chunks.values()} == set(corpus.ids)
            assert all(c["file_path"] == c["full_doc_id"].replace("/", " | ") for c in chunks.values())
            index_chats = len(s.chats())
            assert index_chats > 0 and s.embeddings()
            assert all(r["model"] == s.model for r in s.chats())  # the configured model, and no request of LightRAG's own cache

            for mode in ("naive", "local", "global", "hybrid", "mix"):
                mix.mode = mode
                units = mix.retrieve(q, 5)
                assert units and [u.rank for u in units] == list(range(1, len(units) + 1)), mode
                for u in units:  # every unit maps to corpus documents
                    assert u.doc_id in corpus and all(d in corpus for d in u.meta.get("doc_ids", [u.doc_id])), (mode, u)
                kinds = {u.meta["kind"] for u in units}
                assert kinds == {"chunk"} if mode == "naive" else {"entity", "relationship", "chunk"} <= kinds, (mode, kinds)
                assert any(u.meta["kind"] == "chunk" and u.doc_id == saola and u.text == corpus[saola].text.strip() for u in units), mode
                first[mode] = [(u.doc_id, u.meta["kind"], u.text) for u in units]
            assert mix.stats()["unmapped_units"] == 0 and mix.stats()["queries"] == 5
            # the units are what the package itself would read: its own context text (only_need_context=True) holds every one
            ctx = mix.proc.call({"op": "query", "query": q, "k": 5, "top_k": 5, "mode": "mix", "context": True})["context"]
            for doc, kind, text in first["mix"]:
                probe = text.split(": ", 1)[-1] if kind != "chunk" else text
                assert json.dumps(probe[:40], ensure_ascii=False)[1:-1] in ctx, (kind, probe[:60])
        finally:
            mix.close()

        # the same index, reopened by a fresh adapter process: the same evidence, and nothing is re-extracted
        chats = len(s.chats())
        for mode in ("mix", "naive", "global"):
            again = PeerSystem("lightrag", mode=mode, gateway=gw, chat_model=s.model, embedding_dim=384)
            try:
                again.index(corpus, store)
                assert again.stats()["loaded"]
                got = again.retrieve(q, 5)
                assert [(u.doc_id, u.meta["kind"], u.text) for u in got] == first[mode], mode
                assert again.stats()["unmapped_units"] == 0
            finally:
                again.close()
        assert not any("---Input Text---" in r["messages"][-1]["content"] for r in s.chats()[chats:])


# ---- through the pipeline: the gateway over the run's LLM, and a rebuild replayed from the lab's cache ----------------------
@pytest.mark.filterwarnings("ignore:WildGraphBench")
@pytest.mark.parametrize("peer", ["nano_graphrag", "lightrag"])
def test_a_peer_through_the_pipeline_replays_its_build_from_the_lab_cache(peer, tmp_path):
    """`fanin run system=<peer>` with the run's LLM pointed at the stand-in: PeerSystem starts the lab's gateway over that LLM
    (and the lab's embedder), so the peer's calls land in the lab's LLM cache and ledger. The same build in a fresh outputs folder
    that shares only the LLM cache makes no call to the model server at all."""
    from fanin.doors.cli import main
    from fanin.core.config import resolve_path

    def run(outputs, extra=(), stages="index,retrieve", system=peer):
        ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={outputs}", "progress=false",
              "experiment_name=test", f"system={system}", "llm=vllm", f"llm.base_url={s.base_url}", f"llm.model={s.model}",
              f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1", *extra]
        try: main(["run", "--stages", stages] + ov)
        except SystemExit as e: return e.code
        return 0

    built_env(peer)
    reply = nano_reply if peer == "nano_graphrag" else lightrag_reply
    with StandIn(model=f"standin-{peer}", reply=reply) as s:
        assert run(tmp_path / "a") == 0
        n_chats, n_emb = len(s.chats()), len(s.embeddings())
        assert n_chats > 0 and n_emb == 0  # embeddings come from the lab's embedder, never the model server
        (meta_path,) = (tmp_path / "a").rglob("index.json")
        meta = json.loads(meta_path.read_text())
        assert meta["package"] == read_lock(peer).package and meta["peer"]["n_entities"] > 0
        (packs,) = (tmp_path / "a").rglob("packs.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(packs.read_bytes()).decode().splitlines() if line.strip()]
        docs = set(WildGraphBench(FIXTURE, domains=["nature"]).corpus("nature").ids)
        assert rows and any(r["units"] for r in rows) and all(u["doc_id"] in docs for r in rows for u in r["units"])
        (ledger,) = (tmp_path / "a").rglob("ledger.json")
        led = led_a = json.loads(ledger.read_text())
        assert led["calls"] > 0 and {(r["stage"], r["system"]) for r in led["by_stage_system"]} >= {("index", peer)}
        # the peer's own output, written as a pack file (its units' texts and pages), is scored as the lab scored the peer's run
        pf = tmp_path / "peer_packs.jsonl"
        pf.write_text("".join(json.dumps({"question_id": r["instance_id"], "units": [
            {"text": u["text"], "doc_ids": u["meta"].get("doc_ids") or [u["doc_id"]], "rank": u["rank"]} for u in r["units"]]}) + "\n"
            for r in rows))
        assert run(tmp_path / "a", stages="evaluate") == 0
        mine = [f"system.path={pf}", f"system.name={peer}_file"]
        assert run(tmp_path / "a", mine, "index,retrieve,evaluate", "from_file") == 0
        import pandas as pd
        theirs, ours = (pd.read_csv(next((tmp_path / "a").rglob(f"*-{n}-*/metrics.csv"))).set_index("instance_id").sort_index()
                        for n in (peer, f"{peer}_file"))
        cols = ["er", "ep", "hit", "pack_units", "pack_docs"]
        pd.testing.assert_frame_equal(theirs[cols], ours[cols], check_dtype=False)
        # the same build elsewhere, sharing only the LLM cache: every peer call is a cache hit
        assert run(tmp_path / "b", [f"paths.llm_cache={tmp_path / 'a' / 'llm_cache' / 'llm.sqlite'}"]) == 0
        assert len(s.chats()) == n_chats and len(s.embeddings()) == 0, "a rebuild from the lab's cache reached the model server"
        (ledger,) = (tmp_path / "b").rglob("ledger.json")
        led = json.loads(ledger.read_text())
        assert led["calls"] == 0 and led["cache_hits"] == led["requests"] > 0 and led["failures"] == 0
        (meta_b,) = (tmp_path / "b").rglob("index.json")
        mb = json.loads(meta_b.read_text())
        assert mb["peer"]["n_entities"] == meta["peer"]["n_entities"]
        # the replayed build still reports what a cold one needs: the same tokens, and the model time recorded with each reply
        assert mb["llm_prompt_tokens"] == meta["llm_prompt_tokens"] > 0
        # (compared in the ledgers' milliseconds: a loopback stand-in answers a small build in under 0.05 s, which index.json's
        # one-decimal seconds round to 0.0)
        assert led["replayed_model_ms"] == led_a["model_ms"] > 0 and mb["llm_model_seconds"] == meta["llm_model_seconds"]
        assert mb["llm_calls"] == 0


def test_the_peers_experiment_composes():
    from fanin.core.config import check_params
    from fanin.run.pipeline import system_configs
    cfgs = system_configs(["experiment=peers"])
    assert [c.system.name for c in cfgs] == ["bm25", "community", "raptor", "memory", "ppr", "mem0", "raptor_li", "nano_graphrag",
                                              "lightrag", "ms_graphrag", "mem0_infer", "hipporag"]
    from fanin.results.paradigms import PARADIGMS
    paired = {s for lab, peers in PARADIGMS.values() for s in (lab, *peers)}
    assert paired <= {c.system.name for c in cfgs}, "every system a paradigm table pairs is in the experiment"
    for c in cfgs: check_params(c)


def test_a_peer_is_its_folder_and_its_system_config():
    """A peer is peers/<name>/ (adapter and lock) and configs/system/<name>.yaml: the peers benched, their modes and the
    paradigms they are paired in are derived from those files, and each system config's mode is one its adapter declares."""
    from fanin.doors.bench import BENCH_PEERS
    from fanin.results.paradigms import declared_paradigms, system_declaration
    from fanin.systems.peers import PEER_MODES, adapter_modes, peer_names
    assert BENCH_PEERS == peer_names() == tuple(sorted(PEER_MODES)) and len(peer_names()) >= 6
    paired = {s for _, peers in declared_paradigms().values() for s in peers}
    for p in peer_names():
        assert read_lock(p).version and (ROOT / "configs" / "system" / f"{p}.yaml").exists(), p
    for f in sorted((ROOT / "configs" / "system").glob("*.yaml")):
        node = system_declaration(f.stem)
        if node.get("_target_") != "fanin.systems.peers.PeerSystem": continue
        assert node["peer"] in peer_names(), f"{f.name}: no peers/{node['peer']}/adapter.py"
        assert node["mode"] in adapter_modes(node["peer"]), f"{f.name}: mode {node['mode']!r} is not one its adapter declares"
        assert node["name"] in paired, f"{f.name}: declares no paradigm, so no paradigm table pairs it"


def test_a_peer_adapter_dies_with_the_lab_even_by_sigkill(tmp_path):
    "A `kill -9` of the lab leaves no adapter running (it would hold the peer's environment and memory with nobody to answer)."
    import os, signal, subprocess, sys, time
    adapter = tmp_path / "adapter.py"
    adapter.write_text("import json, time\nprint(json.dumps({'ok': True, 'op': 'hello'}), flush=True)\ntime.sleep(600)\n")
    parent = tmp_path / "parent.py"
    parent.write_text("import sys, time\nfrom fanin.systems.peers import PeerProcess\n"
                      f"p = PeerProcess(sys.executable, {str(adapter)!r}, {{}}, {str(tmp_path / 'a.log')!r}, 60)\n"
                      "print(p.proc.pid, flush=True)\ntime.sleep(600)\n")
    lab = subprocess.Popen([sys.executable, str(parent)], stdout=subprocess.PIPE, text=True)
    child = int(lab.stdout.readline())
    os.kill(lab.pid, signal.SIGKILL); lab.wait()
    t0 = time.time()
    while time.time() - t0 < 10:
        try: os.kill(child, 0)
        except ProcessLookupError: break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL); raise AssertionError("the adapter outlived the lab")


def test_a_peer_index_is_stale_when_its_adapter_or_lock_changes(tmp_path):
    "The lock, the adapter, the shared protocol and passage cutter are in a peer's fingerprint: a change to any rebuilds its index instead of reusing it."
    import shutil
    from fanin.core.fingerprints import model_fingerprint
    from fanin.systems.peers import peers_dir
    folder = tmp_path / "peers" / "mem0"
    shutil.copytree(peers_dir() / "mem0", folder)
    for shared in ("passages.py", "protocol.py"):   # the passage cutter mem0 uses and the protocol every adapter speaks
        shutil.copy(peers_dir() / shared, folder.parent / shared)
    s = PeerSystem("mem0", mode="raw", root=tmp_path)
    before = model_fingerprint(s)
    assert {"adapter.py", "requirements.lock", "passages.py", "protocol.py"} <= set(before)
    (folder / "adapter.py").write_text((folder / "adapter.py").read_text() + "\n# a change to how the lab drives the peer\n")
    after = model_fingerprint(s)
    assert after["adapter.py"] != before["adapter.py"] and after["requirements.lock"] == before["requirements.lock"]
    (folder.parent / "passages.py").write_text((folder.parent / "passages.py").read_text() + "\n# a change to how pages are cut\n")
    assert model_fingerprint(s)["passages.py"] != after["passages.py"]
    (folder.parent / "protocol.py").write_text((folder.parent / "protocol.py").read_text() + "\n# a change to the protocol\n")
    assert model_fingerprint(s)["protocol.py"] != after["protocol.py"]


def test_peer_environments_store_a_wheel_they_share_once():
    """Disk: a wheel that several environments install is stored once. LightRAG and Mem0 pin the same numpy, HippoRAG the lab's own
    CPU torch: after `share_files` (which every build runs; idempotent) their files are one inode, and the lab's still import."""
    import subprocess, sys, sysconfig
    from fanin.systems.peers import share_files
    light, mem0, hippo = built_env("lightrag"), built_env("mem0"), built_env("hipporag")
    for env in (light, mem0, hippo): assert "shares its identical files" in share_files(env.folder, log=lambda m: None)
    site = lambda env: next((env.folder / "lib").glob("python3.*/site-packages"))
    core = lambda sp: sorted((sp / "numpy").rglob("_multiarray_umath*.so"))[0]
    assert core(site(light)).stat().st_ino == core(site(mem0)).stat().st_ino
    lab = Path(sysconfig.get_paths()["purelib"])
    libtorch = "torch/lib/libtorch_cpu.so"
    if (lab / libtorch).exists() and (lab / libtorch).stat().st_dev == site(hippo).stat().st_dev:
        assert (lab / libtorch).stat().st_ino == (site(hippo) / libtorch).stat().st_ino
    r = subprocess.run([sys.executable, "-c", "import torch, numpy; print(torch.ones(2).sum().item())"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "2.0", r.stderr
