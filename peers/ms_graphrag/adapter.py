"""Microsoft GraphRAG (graphrag 3.3.0, MIT) behind the lab's JSONL protocol. Run with the peer environment's python (fanin.systems.peers
starts it); never imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ..., "options": {...}}   build an index in workdir
  {"op": "load", "workdir": ...}                                                                          open a finished one
  {"op": "query", "query": ..., "k": ..., "top_k": ..., "mode": "local|global", "base_url": ..., "options": {...}}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL,
FANIN_EMBED_DIM, FANIN_MAX_ASYNC, TIKTOKEN_CACHE_DIR (the encodings: GraphRAG chunks with o200k_base / cl100k_base),
LITELLM_LOCAL_MODEL_COST_MAP=True (GraphRAG's litellm layer would otherwise fetch its model cost map from GitHub at import).

Index: `graphrag.api.build_index(config, method, input_documents=<DataFrame id,title,text,creation_date>)`: the lab's documents are
handed over as GraphRAG's documents table with `id` = the lab's document id, so every text unit GraphRAG cuts records it as its
`document_id` (text_units.parquet). method "standard" (options.method; the default) is GraphRAG's LLM extraction; "fast" is its
NLP (noun-phrase, regex_english) graph with LLM community reports, which needs NLTK data (brown, punkt_tab, the perceptron tagger,
wordnet) that NLTK downloads from GitHub, not PyPI: offline it is refused before any work, naming what is missing (`need_nltk`);
with the data in NLTK_DATA it runs. The index is built in whatever folder the lab names and read from wherever the lab moves it
(the settings record paths relative to the workdir). The config (`<workdir>/fanin_graphrag.json`, no secrets) points
the completion and embedding models at the gateway (model_provider openai = any OpenAI-compatible server through litellm, api_base
= the gateway, the lab's model names, vectors of FANIN_EMBED_DIM in a local lancedb), GraphRAG's own LLM cache off (type none:
every call goes through the lab's cache), claims off (GraphRAG's default), graphml/embedding snapshots off. Nothing needs the network
beyond the gateway.

Query: the context GraphRAG's search builds for its answer (its context builder, exactly what `graphrag.api.local_search` /
`global_search` hand to their `on_context` callback), not the answer: no answer call is made.
  local:  entities (found by their description embeddings), their relationships, the sources (text units) and community reports
          in GraphRAG's context order;
  global: the community reports at options.community_level (default 2), ranked as GraphRAG batches them for its map step.
Documents: a text unit maps through text_units.parquet (`document_id`); an entity, a relationship and a community report through
their `text_unit_ids` (a report through its community's). A unit none of whose text units resolves gets `doc_ids: []` and
`unmapped: true` (the lab counts it); none is dropped here."""
from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported: no cost map from GitHub
os.environ["LITELLM_TELEMETRY"] = "False"
for _k in ("OPENAI_API_BASE", "OPENROUTER_API_KEY", "OPENROUTER_API_BASE", "GRAPHRAG_API_KEY"):
    os.environ.pop(_k, None)
_CWD = tempfile.mkdtemp(prefix="fanin-graphrag-")
atexit.register(shutil.rmtree, _CWD, True)  # removed when the adapter exits
os.chdir(_CWD)  # GraphRAG reads ./.env: an empty folder, never the lab's checkout

import importlib.metadata  # noqa: E402

import pandas as pd  # noqa: E402

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

from graphrag.api import build_index  # noqa: E402
from graphrag.config.models.graph_rag_config import GraphRagConfig  # noqa: E402

PACKAGE, VERSION = "graphrag", importlib.metadata.version("graphrag")
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_DIM = int(os.environ.get("FANIN_EMBED_DIM", "384"))
MAX_ASYNC = int(os.environ.get("FANIN_MAX_ASYNC", "4"))
MODES = ("local", "global")
METHODS = ("standard", "fast")
INDEX_FILE = "fanin_graphrag.json"
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "workdir": None, "info": None, "tables": None, "maps": None}
LOOP = asyncio.new_event_loop()
asyncio.set_event_loop(LOOP)


def run(coro): return LOOP.run_until_complete(coro)


def settings(opts: dict) -> dict:
    "GraphRAG's settings (no secrets: the key and the gateway URL are filled in by `config`)."
    model = {"model_provider": "openai", "auth_method": "api_key", "retry": {"type": "exponential_backoff", "max_retries": 3}}
    out = {
        "completion_models": {"default_completion_model": {**model, "model": CHAT_MODEL, "call_args": {"temperature": 0.0}}},
        "embedding_models": {"default_embedding_model": {**model, "model": EMBED_MODEL}},
        "concurrent_requests": MAX_ASYNC,
        "input_storage": {"type": "file", "base_dir": "input"},  # paths relative to the workdir: `config` anchors them there
        "output_storage": {"type": "file", "base_dir": "output"},
        "reporting": {"type": "file", "base_dir": "logs"},
        "cache": {"type": "none"},  # the lab's cache is the one cache
        "vector_store": {"type": "lancedb", "db_uri": os.path.join("output", "lancedb"), "vector_size": EMBED_DIM},
        "snapshots": {"graphml": False, "embeddings": False},
        "extract_claims": {"enabled": False},
    }
    for k, v in (opts.get("graphrag") or {}).items():  # options.graphrag: GraphRAG settings merged over these (one level deep)
        out[k] = {**out[k], **v} if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def config(info: dict, workdir: str) -> GraphRagConfig:
    "The settings anchored at `workdir` (the lab moves a finished index folder into place: nothing records where it was built)."
    s = json.loads(json.dumps(info["settings"]))
    for name in ("input_storage", "output_storage", "reporting"):
        if s[name].get("type") == "file": s[name]["base_dir"] = os.path.join(workdir, s[name]["base_dir"])
    if s["vector_store"].get("type") == "lancedb": s["vector_store"]["db_uri"] = os.path.join(workdir, s["vector_store"]["db_uri"])
    key = os.environ.get("OPENAI_API_KEY", "none")
    for group in ("completion_models", "embedding_models"):
        for m in s[group].values(): m.update({"api_key": key, "api_base": STATE["base_url"]})
    return GraphRagConfig(**s)


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL): the next config built uses it."
    if url: STATE["base_url"] = url


def read_tables(workdir: str) -> dict:
    out = {}
    for t in TABLES + ("covariates",):
        p = os.path.join(workdir, "output", f"{t}.parquet")
        out[t] = pd.read_parquet(p) if os.path.exists(p) else None
    missing = [t for t in TABLES if out[t] is None]
    if missing: raise FileNotFoundError(f"GraphRAG's output in {workdir} lacks {', '.join(missing)} (the build did not finish)")
    return out


def as_list(v) -> list:
    if v is None: return []
    try: return [x for x in list(v) if x is not None]
    except TypeError: return [v]


def maps(t: dict) -> dict:
    "From GraphRAG's tables: text unit id -> lab document ids, and each entity / relationship / community -> its text unit ids."
    tu_docs: dict[str, list] = {}
    for _, r in t["text_units"].iterrows():
        d = r.get("document_id")
        if isinstance(d, str) and d and d not in tu_docs.setdefault(r["id"], []): tu_docs[r["id"]].append(d)
    hr = lambda df: {str(r["human_readable_id"]): as_list(r.get("text_unit_ids")) for _, r in df.iterrows()}
    return {"tu_docs": tu_docs, "tu_short": {str(r["human_readable_id"]): r["id"] for _, r in t["text_units"].iterrows()},
            "entity": hr(t["entities"]), "entity_name": {r["title"]: as_list(r.get("text_unit_ids")) for _, r in t["entities"].iterrows()},
            "relationship": hr(t["relationships"]),
            "community": {str(r["community"]): as_list(r.get("text_unit_ids")) for _, r in t["communities"].iterrows()}}


def docs_of(text_units) -> list[str]:
    out = []
    for tu in text_units:
        for d in STATE["maps"]["tu_docs"].get(tu, []):
            if d not in out: out.append(d)
    return out


def counts(known_docs=None) -> dict:
    t, m = STATE["tables"], STATE["maps"]
    out = {"n_documents": len(t["documents"]), "n_text_units": len(t["text_units"]), "n_entities": len(t["entities"]),
           "n_relationships": len(t["relationships"]), "n_communities": len(t["communities"]),
           "n_community_reports": len(t["community_reports"]),
           "text_units_without_doc": sum(1 for tu in t["text_units"]["id"] if not m["tu_docs"].get(tu)),
           "entities_without_doc": sum(1 for v in m["entity"].values() if not docs_of(v)),
           "relationships_without_doc": sum(1 for v in m["relationship"].values() if not docs_of(v)),
           "communities_without_doc": sum(1 for v in m["community"].values() if not docs_of(v))}
    out["n_units"] = out["n_text_units"] + out["n_entities"] + out["n_relationships"] + out["n_community_reports"]
    if known_docs is not None:
        seen = {d for v in m["tu_docs"].values() for d in v}
        out["text_units_with_foreign_doc"] = sum(1 for v in m["tu_docs"].values() if any(d not in known_docs for d in v))
        out["docs_without_text_units"] = len(set(known_docs) - seen)
    return out


NLTK_DATA = ("corpora/brown", "tokenizers/punkt_tab", "taggers/averaged_perceptron_tagger_eng", "corpora/wordnet")


def need_nltk():
    """The "fast" method's noun-phrase extractor (TextBlob over NLTK) needs NLTK's data, which NLTK downloads from GitHub
    (raw.githubusercontent.com), not PyPI: without it the method cannot run offline. Say so before any work is done."""
    import nltk
    missing = []
    for res in NLTK_DATA:
        try: nltk.data.find(res)
        except LookupError: missing.append(res)
    if missing:
        raise RuntimeError(f"method 'fast' (GraphRAG's NLP graph extraction) needs the NLTK data {', '.join(missing)}, which NLTK fetches "
                           f"from GitHub, not PyPI; none is found in NLTK_DATA or nltk's default folders ({', '.join(nltk.data.path[:3])}, ...). "
                           "Install them where the machine has the network (python -m nltk.downloader brown punkt_tab "
                           "averaged_perceptron_tagger_eng wordnet, then set NLTK_DATA), or use method 'standard'")


def open_index(workdir: str):
    path = os.path.join(workdir, INDEX_FILE)
    if not os.path.exists(path): raise FileNotFoundError(f"no GraphRAG index in {workdir} ({INDEX_FILE} is missing)")
    with open(path) as f: STATE["info"] = json.load(f)
    STATE["tables"] = read_tables(workdir)
    STATE["maps"] = maps(STATE["tables"])
    STATE["workdir"] = workdir


def op_index(cmd):
    t0 = time.perf_counter()
    opts = cmd.get("options") or {}
    method = opts.get("method") or "standard"
    if method not in METHODS: raise ValueError(f"options.method must be one of {', '.join(METHODS)}, not {method!r}")
    if method == "fast": need_nltk()
    workdir = cmd["workdir"]
    os.makedirs(workdir, exist_ok=True)
    for stale in ("input", "output", "logs", INDEX_FILE):  # a build starts afresh (an unfinished one left nothing the lab reads)
        p = os.path.join(workdir, stale)
        if os.path.isdir(p): shutil.rmtree(p)
        elif os.path.exists(p): os.remove(p)
    docs = [d for d in cmd["docs"] if d.get("text", "").strip()]
    info = {"method": method, "chat_model": CHAT_MODEL, "embedding_model": EMBED_MODEL, "embedding_dim": EMBED_DIM,
            "settings": settings(opts)}
    frame = pd.DataFrame({"id": [d["id"] for d in docs], "title": [d.get("title") or d["id"] for d in docs],
                          "text": [d["text"] for d in docs], "creation_date": ["1970-01-01T00:00:00+00:00"] * len(docs)})
    results = run(build_index(config(info, workdir), method=method, input_documents=frame))
    errors = [f"{r.workflow}: {type(r.error).__name__}: {r.error}" for r in results if r.error is not None]
    if errors: raise RuntimeError("GraphRAG's pipeline failed: " + "; ".join(errors))
    info["workflows"] = [r.workflow for r in results]
    with open(os.path.join(workdir, INDEX_FILE), "w") as f: json.dump(info, f, indent=1)
    open_index(workdir)
    st = counts({d["id"] for d in docs})
    return {"stats": {"package": PACKAGE, "version": VERSION, "method": method, "docs": len(cmd["docs"]),
                      "empty_docs": len(cmd["docs"]) - len(docs), **st, "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def unit(kind: str, text: str, text_units: list, **extra) -> dict:
    docs = docs_of(text_units)
    return {"kind": kind, "text": text, "doc_ids": docs, "unmapped": not docs, **{k: v for k, v in extra.items() if v is not None}}


def records(ctx, name) -> list[dict]:
    df = ctx.get(name) if isinstance(ctx, dict) else None
    return [] if df is None or len(df) == 0 else df.to_dict("records")


def local_units(ctx) -> list[dict]:
    m = STATE["maps"]
    out = [unit("entity", f'{r.get("entity")}: {r.get("description", "")}', m["entity"].get(str(r.get("id")), []), entity=r.get("entity"))
           for r in records(ctx, "entities")]
    out += [unit("relationship", f'{r.get("source")} -- {r.get("target")}: {r.get("description", "")}',
                 m["relationship"].get(str(r.get("id")), []), entity=f'{r.get("source")} -- {r.get("target")}')
            for r in records(ctx, "relationships")]
    out += [unit("text_unit", str(r.get("text", "")), [m["tu_short"].get(str(r.get("id")), str(r.get("id")))]) for r in records(ctx, "sources")]
    out += [report_unit(r) for r in records(ctx, "reports")]
    return out


def report_unit(r) -> dict:
    cid = str(r.get("id"))
    return unit("community_report", f'{r.get("title", "")}\n{r.get("content", "")}'.strip(), STATE["maps"]["community"].get(cid, []),
                community=cid)


def op_query(cmd):
    if STATE["tables"] is None: raise RuntimeError("no index: send index or load first")
    from graphrag.config.embeddings import entity_description_embedding
    from graphrag.query.factory import get_global_search_engine, get_local_search_engine
    from graphrag.query.indexer_adapters import (read_indexer_communities, read_indexer_covariates, read_indexer_entities,
                                                 read_indexer_relationships, read_indexer_reports, read_indexer_text_units)
    from graphrag.utils.api import get_embedding_store, load_search_prompt
    mode = cmd.get("mode") or "local"
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    opts = cmd.get("options") or {}
    level = int(opts.get("community_level", 2))
    k = int(cmd.get("top_k") or cmd.get("k") or 10)
    t, cfg = STATE["tables"], config(STATE["info"], STATE["workdir"])
    t0 = time.perf_counter()
    if mode == "local":
        cfg.local_search.top_k_entities = k
        cfg.local_search.top_k_relationships = k
        store = get_embedding_store(config=cfg.vector_store, embedding_name=entity_description_embedding)
        covs = read_indexer_covariates(t["covariates"]) if t["covariates"] is not None else []
        engine = get_local_search_engine(config=cfg, reports=read_indexer_reports(t["community_reports"], t["communities"], level),
                                         text_units=read_indexer_text_units(t["text_units"]),
                                         entities=read_indexer_entities(t["entities"], t["communities"], level),
                                         relationships=read_indexer_relationships(t["relationships"]), covariates={"claims": covs},
                                         description_embedding_store=store, response_type="multiple paragraphs",
                                         system_prompt=load_search_prompt(cfg.local_search.prompt))
        ctx = engine.context_builder.build_context(query=cmd["query"], conversation_history=None, **engine.context_builder_params)
        units = local_units(ctx.context_records)
    else:
        engine = get_global_search_engine(cfg, reports=read_indexer_reports(t["community_reports"], t["communities"], level),
                                          entities=read_indexer_entities(t["entities"], t["communities"], level),
                                          communities=read_indexer_communities(t["communities"], t["community_reports"]),
                                          response_type="multiple paragraphs")
        ctx = run(engine.context_builder.build_context(query=cmd["query"], conversation_history=None, **engine.context_builder_params))
        units = [report_unit(r) for r in records(ctx.context_records, "reports")]
    n = len(units)
    for i, u in enumerate(units): u["rank"], u["score"] = i + 1, float(n - i)  # the peer's context order is its ranking
    return {"units": units, "unmapped": sum(u["unmapped"] for u in units), "llm_calls": getattr(ctx, "llm_calls", 0),
            "seconds": round(time.perf_counter() - t0, 4)}


def op_load(cmd) -> dict:
    open_index(cmd["workdir"])
    return {"stats": {**{k: v for k, v in STATE["info"].items() if k != "settings"}, **counts()}}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url)


if __name__ == "__main__":
    main()
