"""HippoRAG 2 (hipporag 2.0.0a4) behind the lab's JSONL protocol. Run with the peer environment's python (fanin.systems.peers starts it);
never imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ..., "mode": "full|dpr", "options": {...}}
  {"op": "load", "workdir": ...}                                                          open a finished one
  {"op": "query", "query": ..., "k": ..., "top_k": ..., "mode": "full|dpr", "base_url": ..., "options": {...}}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL.

HippoRAG indexes passages (strings), not documents. Each lab document is cut into passages of at most `chunk_chars` (4,800
characters, about 1,200 tokens: the size of LightRAG's chunks and the lab's `memory` chunks, so the extraction calls are
comparable): paragraphs packed in order, a longer paragraph cut at sentence ends, a longer sentence at `chunk_chars`. Every
passage is prefixed by its page title on its own line (HippoRAG's own corpora are "title\\ntext" passages), so a passage says
which page it is from. `passages.json` maps each passage to the lab documents it came from (identical passages of several
pages name them all); HippoRAG returns passages by text, so every unit maps back to its documents through that file.

Index: `HippoRAG(global_config=BaseConfig(...)).index(passages)`: NER and triple extraction per passage through the LLM
(OpenIE, online mode), passage / entity / fact embeddings through the embedding endpoint, then the graph (entities, passages,
synonymy edges). The LLM is the lab's chat model at the gateway (HippoRAG's own reply cache is bypassed: the lab's is the one); the embedding model is the lab's embedder at the gateway, named
`text-embedding-<name>` because HippoRAG chooses its OpenAI embedding client by that substring (the gateway serves the lab's
embedder whatever the name). No GPU and no vLLM is used (vLLM is not installed; see the stand-in module below).
Query: mode `full` is HippoRAG 2's retrieval (`retrieve`: fact retrieval, recognition memory (one LLM call per query), dense
passage scores, personalised PageRank); mode `dpr` its dense passage retrieval alone (`retrieve_dpr`). Units are the top
passages in HippoRAG's order with its scores.

HippoRAG saves its graph as a pickle (`graph.pickle`). The lab never reads a pickle: the adapter deletes it after every build,
and `load` rebuilds the graph from HippoRAG's own JSON and parquet files (the OpenIE results and the embedding stores), which
makes no model call."""
from __future__ import annotations

import ctypes
import glob
import json
import os
import signal
import sys
import time


def _die_with_adapter():
    "In a process this adapter forks: SIGKILL when the adapter dies (PR_SET_PDEATHSIG = 1), however it dies."
    try: ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError: pass


# hipporag forks a multiprocessing Manager when it is imported (its embedding cache). The lab kills the adapter with its run,
# even by SIGKILL; without this its forked server would be left running, orphaned, for ever.
os.register_at_fork(after_in_child=_die_with_adapter)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from passages import passages  # noqa: E402
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout

import importlib.metadata  # noqa: E402
import logging  # noqa: E402

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

# vLLM is not in this environment. hipporag imports its offline vLLM client when it is imported (HippoRAG.py ->
# information_extraction/openie_vllm_offline.py -> llm/vllm_offline.py: `from vllm import SamplingParams, LLM`), although that
# client is used only for `openie_mode="offline"` on a GPU. The lab drives HippoRAG through an OpenAI-compatible endpoint
# (`openie_mode="online"`), so the offline client is never made; vLLM 0.6.6 would bring the CUDA build of torch, its nvidia-*
# libraries, triton, xformers and ray (about 5 GB) to a CPU machine for an import. In its place: a module with the two names
# that says why if anything ever calls it.
import types  # noqa: E402


class _NoOfflineVLLM:
    def __init__(self, *a, **kw):
        raise RuntimeError("vLLM is not installed in the lab's HippoRAG environment (peers/hipporag/requirements.lock): "
                           "HippoRAG runs here with openie_mode='online' through the lab's gateway; the offline vLLM mode is not supported")


sys.modules.setdefault("vllm", types.ModuleType("vllm", "stand-in: vLLM is not installed in the lab's HippoRAG environment"))
sys.modules["vllm"].SamplingParams = sys.modules["vllm"].LLM = _NoOfflineVLLM

from hipporag import HippoRAG  # noqa: E402
from hipporag.llm.openai_gpt import CacheOpenAI  # noqa: E402
from hipporag.utils.config_utils import BaseConfig  # noqa: E402

# HippoRAG keeps its own SQLite cache of LLM replies (in the index folder), with no switch to turn it off. The lab has one LLM
# cache: it sits behind the gateway, replays a rebuild at no cost, and counts every request in the ledger, which a reply served
# from HippoRAG's cache would skip. So every call goes to the gateway: the call without the cache decorator (HippoRAG's retries
# kept), returning what the decorated one returns (message, metadata, cache hit).
_call_without_cache = CacheOpenAI.infer.__wrapped__


def _infer(self, *args, **kwargs):
    message, metadata = _call_without_cache(self, *args, **kwargs)
    return message, metadata, False


CacheOpenAI.infer = _infer

PACKAGE, VERSION = "hipporag", importlib.metadata.version("hipporag")
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_NAME = f"text-embedding-{EMBED_MODEL}".replace("/", "_")
CHUNK_CHARS = 4800
INDEX_FILE = "passages.json"
MODES = ("full", "dpr")
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "rag": None, "workdir": None, "info": None, "docs_of": {}}


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL): repoint the open HippoRAG's clients."
    if not url or url == STATE["base_url"]: return
    STATE["base_url"] = url
    rag = STATE["rag"]
    if rag is not None:
        rag.global_config.llm_base_url = rag.global_config.embedding_base_url = url
        for client in (getattr(rag.llm_model, "openai_client", None), getattr(rag.embedding_model, "client", None)):
            if client is not None: client.base_url = url


def config(workdir: str, options: dict) -> BaseConfig:
    extra = dict(options.get("hipporag") or {})
    for fixed in ("save_dir", "llm_name", "llm_base_url", "embedding_model_name", "embedding_base_url"):
        if fixed in extra: raise ValueError(f"options.hipporag.{fixed} is set by the lab (the gateway and the run's models)")
    return BaseConfig(save_dir=os.path.join(workdir, "hipporag"), llm_name=CHAT_MODEL, llm_base_url=STATE["base_url"],
                      embedding_model_name=EMBED_NAME, embedding_base_url=STATE["base_url"], temperature=0.0, **extra)


def drop_pickles(workdir: str) -> int:
    "Delete HippoRAG's graph pickle(s): the lab's index folder holds no pickle; `load` rebuilds the graph from JSON and parquet."
    found = glob.glob(os.path.join(workdir, "hipporag", "**", "*.pickle"), recursive=True)
    for p in found: os.remove(p)
    return len(found)


def open_rag(workdir: str, info: dict, texts: list[str]) -> HippoRAG:
    "A HippoRAG over `workdir` whose graph is built from its saved OpenIE results and embeddings (no model call when they exist)."
    rag = HippoRAG(global_config=config(workdir, info.get("options") or {}))
    rag.index(docs=texts)
    drop_pickles(workdir)
    STATE["rag"], STATE["workdir"], STATE["info"] = rag, workdir, info
    return rag


def graph_stats(rag) -> dict:
    g = getattr(rag, "graph", None)
    return {"graph_nodes": g.vcount() if g is not None else 0, "graph_edges": g.ecount() if g is not None else 0,
            "entities": len(rag.entity_embedding_store.get_all_ids()), "facts": len(rag.fact_embedding_store.get_all_ids())}


def op_index(cmd):
    t0 = time.perf_counter()
    opts = cmd.get("options") or {}
    mode = cmd.get("mode") or opts.get("mode") or "full"
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    limit = int(opts.get("chunk_chars") or CHUNK_CHARS)
    workdir = cmd["workdir"]
    os.makedirs(workdir, exist_ok=True)
    docs_of, order, empty = {}, [], []
    for d in cmd["docs"]:
        parts = passages(d["text"], limit)
        if not parts: empty.append(d["id"]); continue
        for part in parts:
            text = f"{d.get('title') or ''}\n{part}".strip()
            if text not in docs_of: docs_of[text] = []; order.append(text)
            if d["id"] not in docs_of[text]: docs_of[text].append(d["id"])
    info = {"mode": mode, "chunk_chars": limit, "chat_model": CHAT_MODEL, "embedding_model": EMBED_NAME,
            "options": {k: v for k, v in opts.items() if k == "hipporag"}}
    with open(os.path.join(workdir, INDEX_FILE), "w") as f:
        json.dump({"info": info, "passages": [{"text": t, "doc_ids": docs_of[t]} for t in order]}, f, ensure_ascii=False)
    STATE["docs_of"] = docs_of
    rag = open_rag(workdir, info, order)
    st = graph_stats(rag)
    STATE["rag"] = None  # the lab moves the finished folder into place, then loads it
    return {"stats": {"package": PACKAGE, "version": VERSION, **info, "docs": len(cmd["docs"]), "empty_docs": len(empty),
                      "n_chunks": len(order), "n_units": len(order), **st, "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def op_load(cmd):
    workdir = cmd["workdir"]
    path = os.path.join(workdir, INDEX_FILE)
    if not os.path.exists(path): raise FileNotFoundError(f"no HippoRAG index in {workdir} ({INDEX_FILE} is missing)")
    with open(path) as f: saved = json.load(f)
    STATE["docs_of"] = {p["text"]: p["doc_ids"] for p in saved["passages"]}
    rag = open_rag(workdir, saved["info"], [p["text"] for p in saved["passages"]])
    return {"stats": {**saved["info"], "n_chunks": len(saved["passages"]), **graph_stats(rag)}}


def op_query(cmd):
    rag, info = STATE["rag"], STATE["info"] or {}
    if rag is None: raise RuntimeError("no index: send load first")
    mode = cmd.get("mode") or info.get("mode") or "full"
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    k = int(cmd.get("top_k") or cmd.get("k") or 5)
    t0 = time.perf_counter()
    search = rag.retrieve if mode == "full" else rag.retrieve_dpr
    sol = search(queries=[cmd["query"]], num_to_retrieve=k)[0]
    units = []
    for text, score in zip(sol.docs, list(sol.doc_scores)):
        docs = STATE["docs_of"].get(text, [])
        units.append({"kind": "passage", "text": text, "doc_ids": docs, "unmapped": not docs, "rank": len(units) + 1,
                      "score": float(score), "peer_score": float(score)})
    return {"units": units, "unmapped": sum(u["unmapped"] for u in units), "seconds": round(time.perf_counter() - t0, 4)}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url)


if __name__ == "__main__":
    main()
