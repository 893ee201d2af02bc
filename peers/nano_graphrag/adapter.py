"""nano-graphrag behind the lab's JSONL protocol. Run with the peer environment's python (fanin.systems.peers starts it); never imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ...}   build an index in workdir
  {"op": "load", "workdir": ...}                                                         open a finished one
  {"op": "query", "query": ..., "k": ..., "mode": "local|global|naive", "base_url": ..., "context": false}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL,
FANIN_EMBED_DIM, FANIN_MAX_ASYNC, TIKTOKEN_CACHE_DIR (the encodings, so tiktoken never goes to the internet).

Units carry the lab's document ids: nano-graphrag keys a document by the md5 of its stripped text ("doc-<md5>"), and every chunk
records that key as `full_doc_id`; `doc_map.json` (written at index time) maps each key back to the lab ids with that text.
Entities and relationships name their chunks in `source_id`, community reports in `chunk_ids`: their documents come through the
chunks. A unit none of whose chunks resolves gets `doc_ids: []` and `unmapped: true`; the lab counts those."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout

import numpy as np  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

import nano_graphrag  # noqa: E402
from nano_graphrag import GraphRAG, QueryParam  # noqa: E402
from nano_graphrag import _op  # noqa: E402
from nano_graphrag._utils import always_get_an_event_loop, compute_mdhash_id, split_string_by_multi_markers, truncate_list_by_token_size, wrap_embedding_func_with_attrs  # noqa: E402
from nano_graphrag.prompt import GRAPH_FIELD_SEP  # noqa: E402

PACKAGE, VERSION = "nano-graphrag", nano_graphrag.__version__
MODES = ("local", "global", "naive")   # its local and global searches' context, and its chunk vector index
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_DIM = int(os.environ.get("FANIN_EMBED_DIM", "384"))
MAX_ASYNC = int(os.environ.get("FANIN_MAX_ASYNC", "4"))
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "client": None, "rag": None, "workdir": None, "doc_map": {}, "chunks": {}}


def client() -> AsyncOpenAI:
    if STATE["client"] is None:
        STATE["client"] = AsyncOpenAI(base_url=STATE["base_url"], api_key=os.environ.get("OPENAI_API_KEY", "none"), max_retries=0, timeout=600)
    return STATE["client"]


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL)."
    if url and url != STATE["base_url"]:
        STATE["base_url"], STATE["client"] = url, None


async def complete(prompt, system_prompt=None, history_messages=[], **kwargs) -> str:
    "nano-graphrag's model function, to the configured model through the lab (its own response cache is off: the lab caches)."
    kwargs.pop("hashing_kv", None)
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + list(history_messages) + [{"role": "user", "content": prompt}]
    r = await client().chat.completions.create(model=CHAT_MODEL, messages=messages, **kwargs)
    return r.choices[0].message.content or ""


@wrap_embedding_func_with_attrs(embedding_dim=EMBED_DIM, max_token_size=8192)
async def embed(texts: list[str]) -> np.ndarray:
    r = await client().embeddings.create(model=EMBED_MODEL, input=texts, encoding_format="float")
    return np.array([d.embedding for d in r.data], dtype=np.float32)


def make_rag(workdir) -> GraphRAG:
    return GraphRAG(working_dir=workdir, enable_local=True, enable_naive_rag=True, enable_llm_cache=False,
                    best_model_func=complete, cheap_model_func=complete, embedding_func=embed,
                    best_model_max_async=MAX_ASYNC, cheap_model_max_async=MAX_ASYNC, embedding_func_max_async=MAX_ASYNC)


def open_index(workdir):
    STATE["rag"], STATE["workdir"] = make_rag(workdir), workdir
    with open(os.path.join(workdir, "doc_map.json")) as f: STATE["doc_map"] = json.load(f)
    STATE["chunks"] = dict(STATE["rag"].text_chunks._data)


def graph_counts() -> dict:
    g = STATE["rag"].chunk_entity_relation_graph._graph
    reports = STATE["rag"].community_reports._data
    return {"n_chunks": len(STATE["chunks"]), "n_entities": g.number_of_nodes(), "n_relations": g.number_of_edges(), "n_communities": len(reports)}


def op_index(cmd):
    t0 = time.perf_counter()
    workdir = cmd["workdir"]
    os.makedirs(workdir, exist_ok=True)
    doc_map, texts, empty = {}, [], []
    for d in cmd["docs"]:
        text = d["text"].strip()
        if not text: empty.append(d["id"]); continue
        key = compute_mdhash_id(text, prefix="doc-")  # exactly how GraphRAG.ainsert keys a document
        if key not in doc_map: texts.append(text)
        doc_map.setdefault(key, []).append(d["id"])
    with open(os.path.join(workdir, "doc_map.json"), "w") as f: json.dump(doc_map, f)
    rag = make_rag(workdir)
    if texts: rag.insert(texts)
    open_index(workdir)
    stored = {c.get("full_doc_id") for c in STATE["chunks"].values()}
    return {"stats": {"package": PACKAGE, "version": VERSION, "docs": len(cmd["docs"]), "inserted_texts": len(texts),
                      "empty_docs": len(empty), "duplicate_text_docs": sum(len(v) - 1 for v in doc_map.values()),
                      "docs_without_chunks": sum(len(v) for k, v in doc_map.items() if k not in stored),
                      "chunks_without_doc": sum(1 for c in STATE["chunks"].values() if c.get("full_doc_id") not in doc_map),
                      **graph_counts(), "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def docs_of_chunks(chunk_ids) -> list[str]:
    "The lab documents of some nano-graphrag chunks, most-cited first (ties: first seen)."
    count: dict[str, int] = {}
    for c in chunk_ids:
        ch = STATE["chunks"].get(c)
        for d in (STATE["doc_map"].get(ch["full_doc_id"], []) if ch else []): count[d] = count.get(d, 0) + 1
    return sorted(count, key=lambda d: -count[d])


def source_chunks(source_id: str) -> list[str]:
    return [c for c in split_string_by_multi_markers(source_id or "", [GRAPH_FIELD_SEP]) if c]


def unit(kind, text, chunk_ids, **meta) -> dict:
    docs = docs_of_chunks(chunk_ids)
    return {"kind": kind, "text": text, "doc_ids": docs, "chunk_ids": list(chunk_ids), "unmapped": not docs, **meta}


def chunk_unit(chunk: dict) -> dict:
    cid = compute_mdhash_id(chunk["content"], prefix="chunk-")  # how get_chunks keys a chunk
    return unit("chunk", chunk["content"], [cid], chunk_order_index=chunk.get("chunk_order_index"))


async def local_units(query, param) -> list[dict]:
    """`_build_local_query_context` of nano-graphrag 0.0.8.2, taken apart: the same calls, in the same order, kept as records
    (reports, entities, relationships, source chunks: the order of its context text) instead of one CSV string."""
    rag = STATE["rag"]
    results = await rag.entities_vdb.query(query, top_k=param.top_k)
    if not results: return []
    g = rag.chunk_entity_relation_graph
    nodes = await asyncio.gather(*[g.get_node(r["entity_name"]) for r in results])
    degrees = await asyncio.gather(*[g.node_degree(r["entity_name"]) for r in results])
    node_datas = [{**n, "entity_name": r["entity_name"], "rank": d} for r, n, d in zip(results, nodes, degrees) if n is not None]
    comms = await _op._find_most_related_community_from_entities(node_datas, param, rag.community_reports)
    texts = await _op._find_most_related_text_unit_from_entities(node_datas, param, rag.text_chunks, g)
    rels = await _op._find_most_related_edges_from_entities(node_datas, param, g)
    out = [unit("community_report", c["report_string"], c.get("chunk_ids", []), community=c.get("title"),
                rating=c.get("report_json", {}).get("rating")) for c in comms]
    out += [unit("entity", f'{n["entity_name"]} ({n.get("entity_type", "UNKNOWN")}): {n.get("description", "")}',
                 source_chunks(n.get("source_id")), entity=n["entity_name"], degree=n["rank"]) for n in node_datas]
    out += [unit("relationship", f'{e["src_tgt"][0]} -- {e["src_tgt"][1]}: {e["description"]}', source_chunks(e.get("source_id")),
                 weight=e.get("weight"), degree=e.get("rank")) for e in rels]
    out += [chunk_unit(t) for t in texts]
    return out


async def global_units(query, param) -> list[dict]:
    """`global_query` of nano-graphrag 0.0.8.2 up to its context (the analysts' points), keeping which community reports each
    analyst read: a point's documents are those of the reports in its group (it summarises them)."""
    rag = STATE["rag"]
    schema = {k: v for k, v in (await rag.chunk_entity_relation_graph.community_schema()).items() if v["level"] <= param.level}
    if not schema: return []
    ranked = sorted(schema.items(), key=lambda x: x[1]["occurrence"], reverse=True)[: param.global_max_consider_community]
    datas = [c for c in await rag.community_reports.get_by_ids([k for k, _ in ranked]) if c is not None]
    datas = [c for c in datas if c["report_json"].get("rating", 0) >= param.global_min_community_rating]
    datas = sorted(datas, key=lambda x: (x["occurrence"], x["report_json"].get("rating", 0)), reverse=True)
    groups, rest = [], list(datas)
    while rest:  # the grouping _map_global_communities does
        g = truncate_list_by_token_size(rest, key=lambda x: x["report_string"], max_token_size=param.global_max_token_for_community_report)
        groups.append(g); rest = rest[len(g):]
    answers = await _op._map_global_communities(query, datas, param, asdict_config())
    points = []
    for i, mc in enumerate(answers):
        for p in mc:
            if "description" in p: points.append({"analyst": i, "answer": p["description"], "score": p.get("score", 1)})
    points = sorted((p for p in points if p["score"] > 0), key=lambda x: x["score"], reverse=True)
    points = truncate_list_by_token_size(points, key=lambda x: x["answer"], max_token_size=param.global_max_token_for_community_report)
    return [unit("analyst_point", p["answer"], [c for rep in groups[p["analyst"]] for c in rep.get("chunk_ids", [])],
                 analyst=p["analyst"], peer_score=p["score"], communities=[rep.get("title") for rep in groups[p["analyst"]]]) for p in points]


async def naive_units(query, param) -> list[dict]:
    "`naive_query` of nano-graphrag 0.0.8.2 up to its context: the nearest chunks, truncated to its token budget."
    rag = STATE["rag"]
    results = await rag.chunks_vdb.query(query, top_k=param.top_k)
    if not results: return []
    chunks = [c for c in await rag.text_chunks.get_by_ids([r["id"] for r in results]) if c is not None]
    chunks = truncate_list_by_token_size(chunks, key=lambda x: x["content"], max_token_size=param.naive_max_token_for_text_unit)
    return [chunk_unit(c) for c in chunks]


def asdict_config():
    from dataclasses import asdict
    return asdict(STATE["rag"])


def op_query(cmd):
    if STATE["rag"] is None: raise RuntimeError("no index: send index or load first")
    mode = cmd.get("mode", "local")
    param = QueryParam(mode=mode, top_k=int(cmd.get("top_k") or 20), **(cmd.get("param") or {}))
    t0 = time.perf_counter()
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    fn = {"local": local_units, "global": global_units, "naive": naive_units}[mode]
    loop = always_get_an_event_loop()
    units = loop.run_until_complete(fn(cmd["query"], param))
    n = len(units)
    for i, u in enumerate(units): u["rank"], u["score"] = i + 1, float(n - i)  # the peer's context order is its ranking
    out = {"units": units, "seconds": round(time.perf_counter() - t0, 4)}
    if cmd.get("context"):  # the package's own context text, for checking that the units are what it would read
        out["context"] = loop.run_until_complete(STATE["rag"].aquery(cmd["query"], QueryParam(mode=mode, top_k=param.top_k, only_need_context=True, **(cmd.get("param") or {}))))
    return out


def op_load(cmd) -> dict:
    open_index(cmd["workdir"])
    return {"stats": graph_counts()}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url)


if __name__ == "__main__":
    main()
