"""Mem0 (mem0ai 2.2.1) behind the lab's JSONL protocol. Run with the peer environment's python (fanin.systems.peers starts it); never imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ..., "mode": "raw|infer", "options": {...}}
  {"op": "load", "workdir": ...}                                                          open a finished one
  {"op": "query", "query": ..., "k": ..., "top_k": ..., "mode": "raw|infer", "base_url": ..., "options": {...}}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL, FANIN_EMBED_DIM.

Mem0 is a memory layer for chat agents: it is fed messages, not documents. Each lab document is cut as Mem0 users cut documents
they feed it: paragraphs (blank-line separated), consecutive paragraphs packed into passages of at most `chunk_chars` (1000)
characters; a longer paragraph is cut at sentence ends, a longer sentence at `chunk_chars`. Each passage is one
`Memory.add(passage, user_id=USER, metadata={"doc_id": <lab id>, "chunk": i}, infer=...)`, in corpus order:
  raw:   infer=False, the passage is stored verbatim as one memory (Mem0's own words: "keeps the source passage");
  infer: infer=True, Mem0's LLM rewrites the passage into facts (its additive extraction prompt, one call per passage); every
         fact is stored with the metadata of the add that produced it, so it carries the passage's doc_id.
Query: `Memory.search(query, filters={"user_id": USER}, top_k=k)` (mem0ai 2.x takes the user in `filters`, not as a keyword
argument); units are the memories in Mem0's ranking, with their doc ids from metadata. A memory whose metadata names no document
gets `doc_ids: []` and `unmapped: true` (the lab counts those); none is dropped here.

Mem0's models: llm provider openai (openai_base_url = the gateway, api key = the gateway token, model = the lab's chat model,
temperature 0 so the lab's cache can replay it), embedder provider openai (the gateway, the lab's embedding model, dims
FANIN_EMBED_DIM). Vector store: qdrant in local path mode (`<workdir>/qdrant`, on_disk, no server); history db
`<workdir>/history.db`. Telemetry is off (MEM0_TELEMETRY=False, which also stops the notices that fetch their text from GitHub);
MEM0_DIR (where Mem0 writes its anonymous user id) is a temporary folder removed at exit, never ~/.mem0. The base install has no
spaCy and no fastembed, so Mem0's entity boosts and BM25 keyword scores are off: its search is semantic similarity alone.

Infer mode's prompt carries "Current Date" / "Observation Date" (today, UTC): the lab's cache replays an infer build only on the
same day, unless options.current_date pins the date (an ISO date; recorded in the index)."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from passages import passages  # noqa: E402
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout

# before mem0 is imported: it reads these at import time
os.environ["MEM0_TELEMETRY"] = "False"
_MEM0_HOME = tempfile.mkdtemp(prefix="fanin-mem0-home-")
os.environ["MEM0_DIR"] = _MEM0_HOME
atexit.register(shutil.rmtree, _MEM0_HOME, True)
for _k in ("OPENROUTER_API_KEY", "OPENROUTER_API_BASE", "OPENAI_API_BASE"):  # would route Mem0's clients elsewhere
    os.environ.pop(_k, None)

import importlib.metadata  # noqa: E402
import logging  # noqa: E402

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

import mem0.configs.prompts as mem0_prompts  # noqa: E402
from mem0 import Memory  # noqa: E402
from mem0.memory import telemetry as mem0_telemetry  # noqa: E402

assert mem0_telemetry.MEM0_TELEMETRY is False, "Mem0 telemetry must be off"

PACKAGE, VERSION = "mem0ai", importlib.metadata.version("mem0ai")
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_DIM = int(os.environ.get("FANIN_EMBED_DIM", "384"))
USER = "fanin-corpus"  # every passage of the corpus is one user's memory
COLLECTION = "fanin"
CHUNK_CHARS = 1000
INDEX_FILE = "fanin_mem0.json"
MODES = {"raw": False, "infer": True}
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "mem": None, "workdir": None, "info": None}
_resolve_dates = mem0_prompts._resolve_dates


def pin_date(date: str | None):
    "Pin the date Mem0 writes into its extraction prompt (None: the package's own, today in UTC)."
    if date: mem0_prompts._resolve_dates = lambda current_date=None, observation_date=None: (current_date or date, observation_date or current_date or date)
    else: mem0_prompts._resolve_dates = _resolve_dates


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL): repoint the open Memory's two clients."
    if not url or url == STATE["base_url"]: return
    STATE["base_url"] = url
    mem = STATE["mem"]
    if mem is not None:
        mem.llm.client.base_url = url
        mem.embedding_model.client.base_url = url


def mem_config(workdir) -> dict:
    key = os.environ.get("OPENAI_API_KEY", "none")
    return {
        "vector_store": {"provider": "qdrant", "config": {"collection_name": COLLECTION, "embedding_model_dims": EMBED_DIM,
                                                          "path": os.path.join(workdir, "qdrant"), "on_disk": True}},
        "llm": {"provider": "openai", "config": {"model": CHAT_MODEL, "api_key": key, "openai_base_url": STATE["base_url"],
                                                 "temperature": 0.0}},
        "embedder": {"provider": "openai", "config": {"model": EMBED_MODEL, "api_key": key, "openai_base_url": STATE["base_url"],
                                                      "embedding_dims": EMBED_DIM}},
        "history_db_path": os.path.join(workdir, "history.db"),
    }


def close_memory():
    mem, STATE["mem"], STATE["workdir"] = STATE["mem"], None, None
    if mem is None: return
    try: mem.close()
    finally:
        client = getattr(mem.vector_store, "client", None)
        if client is not None: client.close()  # releases the local qdrant folder's lock


def open_memory(workdir) -> Memory:
    if STATE["mem"] is not None and STATE["workdir"] == workdir: return STATE["mem"]
    close_memory()
    STATE["mem"], STATE["workdir"] = Memory.from_config(mem_config(workdir)), workdir
    return STATE["mem"]


def all_points() -> list:
    mem, out, offset = STATE["mem"], [], None
    while True:
        pts, offset = mem.vector_store.client.scroll(COLLECTION, limit=256, offset=offset, with_payload=True, with_vectors=False)
        out.extend(pts)
        if offset is None: return out


def doc_of(meta) -> str | None:
    d = (meta or {}).get("doc_id")
    return d if isinstance(d, str) and d else None


def counts(known_docs=None) -> dict:
    pts = [p for p in all_points() if (p.payload or {}).get("type") != "user_identity"]
    with_doc = [doc_of(p.payload) for p in pts]
    out = {"n_chunks": len(pts), "n_memories": len(pts), "memories_without_doc": sum(d is None for d in with_doc),
           "docs_with_memories": len({d for d in with_doc if d})}
    if known_docs is not None:
        out["memories_with_foreign_doc"] = sum(1 for d in with_doc if d and d not in known_docs)
        out["docs_without_memories"] = len(set(known_docs) - set(with_doc))
    return out


def op_index(cmd):
    t0 = time.perf_counter()
    opts = cmd.get("options") or {}
    mode = cmd.get("mode") or opts.get("mode") or "raw"
    if mode not in MODES: raise ValueError(f"mode must be raw or infer, not {mode!r}")
    limit = int(opts.get("chunk_chars") or CHUNK_CHARS)
    date = opts.get("current_date")
    workdir = cmd["workdir"]
    close_memory()
    os.makedirs(workdir, exist_ok=True)
    for stale in ("qdrant", "history.db", INDEX_FILE):  # a build starts afresh (an unfinished one left nothing the lab reads)
        p = os.path.join(workdir, stale)
        if os.path.isdir(p): shutil.rmtree(p)
        elif os.path.exists(p): os.remove(p)
    pin_date(date)
    mem = open_memory(workdir)
    n_pass, empty, without = 0, [], {}
    for d in cmd["docs"]:
        parts = passages(d["text"], limit)
        if not parts: empty.append(d["id"]); continue
        for i, part in enumerate(parts):
            r = mem.add(part, user_id=USER, metadata={"doc_id": d["id"], "chunk": i}, infer=MODES[mode])
            n_pass += 1
            if not r.get("results"): without[d["id"]] = without.get(d["id"], 0) + 1
    info = {"mode": mode, "infer": MODES[mode], "user_id": USER, "collection": COLLECTION, "chunk_chars": limit,
            "current_date": date, "chat_model": CHAT_MODEL, "embedding_model": EMBED_MODEL, "embedding_dim": EMBED_DIM}
    with open(os.path.join(workdir, INDEX_FILE), "w") as f: json.dump(info, f, indent=1)
    STATE["info"] = info
    st = counts({d["id"] for d in cmd["docs"]} - set(empty))
    close_memory()  # the lab moves the finished folder into place, then loads it
    return {"stats": {"package": PACKAGE, "version": VERSION, **info, "docs": len(cmd["docs"]), "passages": n_pass, "empty_docs": len(empty),
                      "passages_without_memories": sum(without.values()), **st,
                      "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def op_load(cmd):
    workdir = cmd["workdir"]
    path = os.path.join(workdir, INDEX_FILE)
    if not os.path.exists(path): raise FileNotFoundError(f"no Mem0 index in {workdir} ({INDEX_FILE} is missing)")
    with open(path) as f: STATE["info"] = json.load(f)
    pin_date(STATE["info"].get("current_date"))
    open_memory(workdir)
    return {"stats": {**STATE["info"], **counts()}}


def op_query(cmd):
    if STATE["mem"] is None: raise RuntimeError("no index: send index or load first")
    info = STATE["info"] or {}
    mode = cmd.get("mode") or info.get("mode")
    if mode != info.get("mode"):
        raise ValueError(f"the index in {STATE['workdir']} was built in mode {info.get('mode')!r} (infer={info.get('infer')}); "
                         f"the query asks mode {mode!r}: Mem0's mode is fixed at index time (send the mode with index)")
    search = dict((cmd.get("options") or {}).get("search") or {})
    k = int(cmd.get("top_k") or cmd.get("k") or 10)
    t0 = time.perf_counter()
    res = STATE["mem"].search(cmd["query"], filters={"user_id": USER}, top_k=k, **search)
    units = []
    for r in res.get("results", []):
        meta = r.get("metadata") or {}
        doc = doc_of(meta)
        units.append({"kind": "memory" if info.get("infer") else "passage", "text": r.get("memory", ""), "doc_ids": [doc] if doc else [],
                      "unmapped": doc is None, "rank": len(units) + 1, "score": float(r.get("score") or 0.0),
                      "peer_score": r.get("score"), "chunk_order_index": meta.get("chunk"), "memory_id": r.get("id")})
    return {"units": units, "unmapped": sum(u["unmapped"] for u in units), "seconds": round(time.perf_counter() - t0, 4)}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url, close=close_memory)


if __name__ == "__main__":
    main()
