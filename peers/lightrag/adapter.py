"""LightRAG (lightrag-hku) behind the lab's JSONL protocol. Run with the peer environment's python (fanin.systems.peers starts it); never
imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ..., "options": {...}}   build an index in workdir
  {"op": "load", "workdir": ...}                                                                          open a finished one
  {"op": "query", "query": ..., "k": ..., "top_k": ..., "mode": "naive|local|global|hybrid|mix", "base_url": ..., "context": false}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL,
FANIN_EMBED_DIM, FANIN_MAX_ASYNC, TIKTOKEN_CACHE_DIR (the encodings, so tiktoken never goes to the internet).
Models: lightrag.llm.openai's `openai_complete_if_cache` and `openai_embed` with the gateway's base_url and token. LightRAG's own
LLM response cache is off (`enable_llm_cache=False`, also for entity extraction): every call goes through the lab's cache.

Units carry the lab's document ids: each distinct document text is inserted with `ids=[lab doc id]` (LightRAG's `ainsert`), so
every chunk records the lab id as its `full_doc_id`; `file_paths` carry the id too (its "/" written " | ", since LightRAG keeps
only a path's basename). Documents with the same text are inserted once (LightRAG would drop the copies as duplicates);
`doc_map.json` maps each inserted key to every lab id with that text. The evidence pack is LightRAG's structured context
(`aquery_data`: what `only_need_context=True` renders): entities and relationships, whose documents come through the chunk ids
in their `source_id`, and chunks. A unit none of whose chunks resolves gets `doc_ids: []` and `unmapped: true`; the lab counts it."""
from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout
_CWD = tempfile.mkdtemp(prefix="fanin-lightrag-")
atexit.register(shutil.rmtree, _CWD, True)  # removed when the adapter exits
os.chdir(_CWD)  # lightrag reads ./.env at import: an empty folder, never the lab's checkout

import numpy as np  # noqa: E402

import lightrag  # noqa: E402
from lightrag import LightRAG, QueryParam  # noqa: E402
from lightrag.constants import GRAPH_FIELD_SEP  # noqa: E402
from lightrag.llm.openai import openai_complete_if_cache, openai_embed  # noqa: E402
from lightrag.utils import EmbeddingFunc  # noqa: E402

PACKAGE, VERSION = "lightrag-hku", lightrag.__version__
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_DIM = int(os.environ.get("FANIN_EMBED_DIM", "384"))
MAX_ASYNC = int(os.environ.get("FANIN_MAX_ASYNC", "4"))
MODES = ("naive", "local", "global", "hybrid", "mix")
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "rag": None, "workdir": None, "doc_map": {}, "paths": {}}
LOOP = asyncio.new_event_loop()  # one loop for the process: LightRAG binds its storages to the loop that initialised them
asyncio.set_event_loop(LOOP)


def api_key() -> str: return os.environ.get("OPENAI_API_KEY", "none")


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL); the model functions read it per call."
    if url: STATE["base_url"] = url


async def complete(prompt, system_prompt=None, history_messages=None, **kwargs) -> str:
    "LightRAG's model function: the configured model through the lab's gateway."
    kwargs.pop("hashing_kv", None)
    return await openai_complete_if_cache(CHAT_MODEL, prompt, system_prompt=system_prompt, history_messages=history_messages or [],
                                          base_url=STATE["base_url"], api_key=api_key(), **kwargs)


async def _embed(texts, **kwargs) -> np.ndarray:
    kwargs.pop("embedding_dim", None)  # never ask for a reduced size: the lab's embedder has one
    return await openai_embed.func(texts, model=EMBED_MODEL, base_url=STATE["base_url"], api_key=api_key(), **kwargs)


EMBED = EmbeddingFunc(embedding_dim=EMBED_DIM, func=_embed, max_token_size=8192, model_name=EMBED_MODEL)


def make_rag(workdir, options=None) -> LightRAG:
    return LightRAG(working_dir=workdir, llm_model_func=complete, llm_model_name=CHAT_MODEL, embedding_func=EMBED,
                    enable_llm_cache=False, enable_llm_cache_for_entity_extract=False, llm_model_max_async=MAX_ASYNC,
                    embedding_func_max_async=MAX_ASYNC, **(options or {}))


def run(coro): return LOOP.run_until_complete(coro)


def close_rag():
    if STATE["rag"] is not None:
        try: run(STATE["rag"].finalize_storages())
        except Exception: traceback.print_exc()
        STATE["rag"] = None


def open_index(workdir, options=None):
    close_rag()
    rag = make_rag(workdir, options)
    run(rag.initialize_storages())
    STATE["rag"], STATE["workdir"] = rag, workdir
    with open(os.path.join(workdir, "doc_map.json")) as f: m = json.load(f)
    STATE["doc_map"], STATE["paths"] = m["docs"], m["file_paths"]


def read_json(workdir, name) -> dict:
    p = os.path.join(workdir, name)
    if not os.path.exists(p): return {}
    with open(p) as f: return json.load(f)


def graph_counts() -> dict:
    rag = STATE["rag"]
    nodes, edges = run(rag.chunk_entity_relation_graph.get_all_nodes()), run(rag.chunk_entity_relation_graph.get_all_edges())
    chunks = read_json(STATE["workdir"], "kv_store_text_chunks.json")
    return {"n_chunks": len(chunks), "n_entities": len(nodes), "n_relations": len(edges)}


def file_path_of(key: str, taken: set) -> str:
    fp, i = key.replace("/", " | "), 1
    while fp in taken: i += 1; fp = f"{key.replace('/', ' | ')} ({i})"
    taken.add(fp)
    return fp


def op_index(cmd):
    t0 = time.perf_counter()
    workdir = cmd["workdir"]
    os.makedirs(workdir, exist_ok=True)
    options = (cmd.get("options") or {}).get("lightrag") or {}
    docs, by_text, empty, texts, keys, paths, taken = {}, {}, [], [], [], {}, set()
    for d in cmd["docs"]:
        text = d["text"].strip()
        if not text: empty.append(d["id"]); continue
        if text in by_text: docs[by_text[text]].append(d["id"]); continue
        by_text[text] = d["id"]
        docs[d["id"]] = [d["id"]]
        texts.append(text); keys.append(d["id"])
        paths[file_path_of(d["id"], taken)] = d["id"]
    with open(os.path.join(workdir, "doc_map.json"), "w") as f: json.dump({"docs": docs, "file_paths": paths}, f)
    close_rag()
    rag = make_rag(workdir, options)
    run(rag.initialize_storages())
    STATE["rag"], STATE["workdir"] = rag, workdir
    if texts: run(rag.ainsert(texts, ids=keys, file_paths=list(paths)))
    status = {k: s for k, s in zip(keys, run(rag.doc_status.get_by_ids(keys))) if s}
    failed = {k: (s.get("error_msg") or s.get("status")) for k, s in status.items() if str(s.get("status", "")).lower().split(".")[-1] != "processed"}
    failed.update({k: "no status recorded" for k in keys if k not in status})
    run(rag.finalize_storages())  # persist everything, then open it as `load` would
    STATE["rag"] = None
    open_index(workdir, options)
    chunks = read_json(workdir, "kv_store_text_chunks.json")
    stored = {c.get("full_doc_id") for c in chunks.values()}
    if failed and len(failed) == len(keys):
        raise RuntimeError(f"LightRAG processed none of the {len(keys)} documents; first errors: {list(failed.items())[:3]}")
    return {"stats": {"package": PACKAGE, "version": VERSION, "docs": len(cmd["docs"]), "inserted_texts": len(texts),
                      "empty_docs": len(empty), "duplicate_text_docs": sum(len(v) - 1 for v in docs.values()),
                      "failed_docs": len(failed), "failed_examples": dict(list(failed.items())[:5]),
                      "docs_without_chunks": sum(len(v) for k, v in docs.items() if k not in stored),
                      "chunks_without_doc": sum(1 for c in chunks.values() if c.get("full_doc_id") not in docs),
                      **graph_counts(), "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def chunk_docs(chunk_ids) -> list[str]:
    "The lab documents of some LightRAG chunks, most-cited first (ties: first seen)."
    rows = run(STATE["rag"].text_chunks.get_by_ids(list(chunk_ids))) if chunk_ids else []
    count: dict[str, int] = {}
    for ch in rows:
        for d in (STATE["doc_map"].get(ch.get("full_doc_id"), []) if ch else []): count[d] = count.get(d, 0) + 1
    return sorted(count, key=lambda d: -count[d])


def source_chunks(source_id) -> list[str]:
    return [c for c in str(source_id or "").split(GRAPH_FIELD_SEP) if c]


def unit(kind, text, chunk_ids, docs=None, **meta) -> dict:
    docs = chunk_docs(chunk_ids) if docs is None else docs
    return {"kind": kind, "text": text, "doc_ids": docs, "chunk_ids": list(chunk_ids), "unmapped": not docs, **meta}


def chunk_unit(c: dict) -> dict:
    cid = c.get("chunk_id") or ""
    docs = chunk_docs([cid]) if cid else []
    if not docs:  # no chunk id: its file path names the document
        key = STATE["paths"].get(c.get("file_path") or "")
        docs = list(STATE["doc_map"].get(key, [])) if key else []
    return unit("chunk", c.get("content", ""), [cid] if cid else [], docs=docs, file_path=c.get("file_path"))


def op_query(cmd):
    if STATE["rag"] is None: raise RuntimeError("no index: send index or load first")
    mode = cmd.get("mode", "mix")
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    top_k = int(cmd.get("top_k") or 20)
    extra = {**((cmd.get("options") or {}).get("query") or {}), **(cmd.get("param") or {})}
    param = QueryParam(mode=mode, **{"top_k": top_k, "chunk_top_k": top_k, "enable_rerank": False, **extra})
    t0 = time.perf_counter()
    res = run(STATE["rag"].aquery_data(cmd["query"], param))
    data = res.get("data") or {}
    units = [unit("entity", f'{e.get("entity_name")} ({e.get("entity_type", "UNKNOWN")}): {e.get("description", "")}',
                  source_chunks(e.get("source_id")), entity=e.get("entity_name")) for e in data.get("entities", [])]
    units += [unit("relationship", f'{r.get("src_id")} -- {r.get("tgt_id")}: {r.get("description", "")}', source_chunks(r.get("source_id")),
                   entity=f'{r.get("src_id")} -- {r.get("tgt_id")}', weight=r.get("weight"), keywords=r.get("keywords"))
              for r in data.get("relationships", [])]
    units += [chunk_unit(c) for c in data.get("chunks", [])]
    n = len(units)
    for i, u in enumerate(units): u["rank"], u["score"] = i + 1, float(n - i)  # the peer's context order is its ranking
    out = {"units": units, "status": res.get("status"), "message": res.get("message"),
           "keywords": (res.get("metadata") or {}).get("keywords"), "seconds": round(time.perf_counter() - t0, 4)}
    if cmd.get("context"):  # the package's own context text (only_need_context=True), for checking the units against it
        cparam = QueryParam(mode=mode, **{"top_k": top_k, "chunk_top_k": top_k, "enable_rerank": False, **extra, "only_need_context": True})
        out["context"] = run(STATE["rag"].aquery(cmd["query"], cparam))
    return out


def op_load(cmd) -> dict:
    open_index(cmd["workdir"], ((cmd.get("options") or {}).get("lightrag")))
    return {"stats": graph_counts()}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url, close=close_rag)


if __name__ == "__main__":
    main()
