"""The llama-index RAPTOR pack (llama-index-packs-raptor) behind the lab's JSONL protocol. Run with the peer environment's python
(fanin.systems.peers starts it); never imported by the lab.

stdin, one JSON object a line:
  {"op": "index", "docs": [{"id", "title", "text"}...], "workdir": ..., "base_url": ..., "options": {...}}   build an index in workdir
  {"op": "load", "workdir": ...}                                                                          open a finished one
  {"op": "query", "query": ..., "k": ..., "top_k": ..., "mode": "collapsed|tree_traversal", "base_url": ...}
  {"op": "quit"}
Replies and the hello: peers/protocol.py (shared by every adapter), which also sends all the package prints to stderr.

Environment: OPENAI_BASE_URL / OPENAI_API_KEY (the lab's gateway and its token), FANIN_CHAT_MODEL, FANIN_EMBED_MODEL,
FANIN_EMBED_DIM, FANIN_MAX_ASYNC, TIKTOKEN_CACHE_DIR (the encodings, so tiktoken never goes to the internet).
Models: llama-index's `OpenAILike` (any model name, the gateway's base_url and token, a modest `max_tokens`) writes the summaries;
`OpenAIEmbedding(model_name=<the lab's embedder>)` embeds through the gateway. The vector store is llama-index's in-memory
SimpleVectorStore (the pack's default when none is given), persisted with the docstore to `<workdir>/storage`; `load` reopens it
with `RaptorRetriever.from_persist_dir` and rebuilds nothing.

The pack, as released: `RaptorPack(documents, ...)` splits the documents (SentenceSplitter), then for `tree_depth` levels embeds
the current nodes, soft-clusters them (UMAP + GMM) and writes one tree_summarize summary per cluster. One change for
reproducibility: the pack's UMAP runs unseeded (the pack seeds only its GMMs and python's `random`), so the same corpus could
cluster differently and re-ask the LLM different questions on a rebuild; here UMAP gets the pack's own seed (224), so a rebuild
makes exactly the same requests (replayed from the lab's cache).

Units carry the lab's document ids: each lab document becomes a llama-index `Document(id_=<lab id>, metadata={"doc_id": <lab id>})`
with `doc_id` excluded from the embedding and LLM text, so every leaf chunk records its document. Summary nodes list the
documents they summarise: the pack records a child's parent only in the child's `parent_id` metadata, and with soft clusters a
node in several clusters keeps only the last one; so the adapter also records, while the pack builds, which nodes each summary
was written from (`tree.json`: the pack's clusters and the summary node each became). A summary's documents are those of all
leaves under it (sorted, as the lab's own raptor does). A unit whose documents cannot be recovered gets `doc_ids: []` and
`unmapped: true`; the lab counts it."""
from __future__ import annotations

import asyncio
import atexit
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # peers/: the shared modules
from protocol import serve, take_stdout  # noqa: E402

take_stdout()  # before the package is imported: whatever it prints goes to stderr, the protocol keeps stdout
_CWD = tempfile.mkdtemp(prefix="fanin-raptor-li-")
atexit.register(shutil.rmtree, _CWD, True)  # removed when the adapter exits
os.chdir(_CWD)  # nothing the packages write lands in the lab's checkout

from llama_index.core import Document, Settings  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.embeddings.openai import OpenAIEmbedding  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
import llama_index.packs.raptor.base as rbase  # noqa: E402
import llama_index.packs.raptor.clustering as rclust  # noqa: E402
from llama_index.packs.raptor import RaptorPack, RaptorRetriever  # noqa: E402
from llama_index.core.utils import globals_helper  # noqa: E402
from nltk.tokenize import PunktSentenceTokenizer  # noqa: E402

# SentenceSplitter splits long texts with llama-index's punkt tokenizer, an untrained `PunktSentenceTokenizer()` that needs no
# data; but its property also loads NLTK's stopword list, which NLTK downloads from GitHub (not PyPI) and so is missing here:
# a real page longer than a chunk failed with "Resource 'stopwords' not found". Handing llama-index the very tokenizer it would
# build leaves the split unchanged and needs no download; the stopword list itself is never substituted (nothing here uses it).
globals_helper._punkt_tokenizer = PunktSentenceTokenizer()

PACKAGE = "llama-index-packs-raptor"
VERSION = importlib.metadata.version(PACKAGE)
CORE_VERSION = importlib.metadata.version("llama-index-core")
CHAT_MODEL = os.environ.get("FANIN_CHAT_MODEL", "lab")
EMBED_MODEL = os.environ.get("FANIN_EMBED_MODEL", "all-MiniLM-L6-v2")
EMBED_DIM = int(os.environ.get("FANIN_EMBED_DIM", "384"))
MAX_ASYNC = int(os.environ.get("FANIN_MAX_ASYNC", "4"))
MODES = ("collapsed", "tree_traversal")
DEFAULTS = {"tree_depth": 3, "chunk_size": 1024, "chunk_overlap": 200, "max_tokens": 256, "context_window": 4096, "temperature": 0.0,
            "summary_prompt": rbase.DEFAULT_SUMMARY_PROMPT, "embed_batch_size": 64}
STATE = {"base_url": os.environ.get("OPENAI_BASE_URL"), "retriever": None, "workdir": None, "node_docs": {}, "levels": {}, "meta": {}}


def api_key() -> str: return os.environ.get("OPENAI_API_KEY", "none")


def use_base_url(url):
    "Each command may name its own gateway URL (the lab counts calls per stage by URL); the model clients are made per command."
    if url: STATE["base_url"] = url


def settings(options) -> dict:
    return {**DEFAULTS, **((options or {}).get("raptor") or {})}


def make_llm(opt) -> OpenAILike:
    return OpenAILike(model=CHAT_MODEL, api_base=STATE["base_url"], api_key=api_key(), is_chat_model=True, is_function_calling_model=False,
                      context_window=int(opt["context_window"]), max_tokens=int(opt["max_tokens"]), temperature=float(opt["temperature"]),
                      max_retries=2, timeout=600.0, reuse_client=False)


def make_embed(opt) -> OpenAIEmbedding:
    # model_name=...: any name (the pack's OpenAIEmbedding checks `model` against OpenAI's list; `model_name` replaces it)
    return OpenAIEmbedding(model_name=EMBED_MODEL, api_base=STATE["base_url"], api_key=api_key(), embed_batch_size=int(opt["embed_batch_size"]),
                           max_retries=2, timeout=600.0, reuse_client=False)


# ---- reproducible clustering: the pack's UMAP with the pack's own seed ------------------------------------------------------
def _global_cluster_embeddings(embeddings, dim, n_neighbors=None, metric="cosine"):
    import umap
    if n_neighbors is None: n_neighbors = int((len(embeddings) - 1) ** 0.5)
    return umap.UMAP(n_neighbors=n_neighbors, n_components=dim, metric=metric, random_state=rclust.RANDOM_SEED).fit_transform(embeddings)


def _local_cluster_embeddings(embeddings, dim, num_neighbors=10, metric="cosine"):
    import umap
    return umap.UMAP(n_neighbors=num_neighbors, n_components=dim, metric=metric, random_state=rclust.RANDOM_SEED).fit_transform(embeddings)


rclust.global_cluster_embeddings = _global_cluster_embeddings
rclust.local_cluster_embeddings = _local_cluster_embeddings

# ---- a clustering that survives collapsed points: the pack's GMMs, regularised only when a fit is degenerate ------------------
# The pack picks the number of clusters by fitting GaussianMixture for 1 .. len(nodes)-1 components on the UMAP coordinates. When
# UMAP packs a few points on top of each other (which ones depends on the CPU's float arithmetic: the same corpus did this on an
# AVX-512 CPU and not on an AVX2 one), a many-component fit has a component with a singular covariance and sklearn raises
# "ill-defined empirical covariance"; the pack does not catch it, so the whole index build failed. Here such a fit is retried
# with sklearn's own remedy, a larger `reg_covar` (x10 a step, from sklearn's 1e-6 up to 1e-1), with the same seed: a fit that
# succeeds first time is exactly the pack's; a degenerate one becomes a well-defined fit instead of a crash. Every regularised
# fit is counted (`gmm_regularised_fits` in the index stats), so a user sees when it happened.
REG_COVAR_MAX = 1e-1


class SteadyGaussianMixture(rclust.GaussianMixture):
    def fit(self, X, y=None):
        first = self.reg_covar
        while True:
            try:
                fitted = super().fit(X, y)
            except ValueError as e:
                if "ill-defined empirical covariance" not in str(e) or self.reg_covar * 10 > REG_COVAR_MAX * 1.0001: raise
                self.reg_covar *= 10
                continue
            if self.reg_covar != first: TRACE["regularised"].append([int(self.n_components), float(self.reg_covar)])
            return fitted


rclust.GaussianMixture = SteadyGaussianMixture

# ---- recording the tree as the pack builds it: its clusters (member node ids) and the summary node made from each -------------
TRACE = {"clusters": [], "summaries": [], "regularised": []}
_get_clusters, _TextNode = rbase.get_clusters, rbase.TextNode


def _recording_get_clusters(nodes, embedding_map, *a, **kw):
    clusters = _get_clusters(nodes, embedding_map, *a, **kw)
    TRACE["clusters"].extend([n.id_ for n in c] for c in clusters)
    return clusters


def _recording_text_node(*a, **kw):
    node = _TextNode(*a, **kw)  # in the pack's insert(), TextNode makes exactly the summary nodes, one per cluster, in cluster order
    TRACE["summaries"].append([node.id_, node.metadata.get("level")])
    return node


rbase.get_clusters = _recording_get_clusters
rbase.TextNode = _recording_text_node


def all_nodes(retriever) -> dict:
    return dict(retriever.index.docstore.docs)


def is_summary(node) -> bool: return "level" in (node.metadata or {})


def recover(nodes: dict, tree: dict, known: set) -> tuple[dict, dict]:
    """Each node's lab documents (leaves: their `doc_id`, else the Document they came from; summaries: every leaf under them,
    through the recorded clusters and the pack's own `parent_id` links) and each node's level (leaves 0, a summary 1 + the pack's
    level)."""
    children: dict[str, set] = {sid: set(m) for sid, m in (tree.get("children") or {}).items()}
    for nid, n in nodes.items():
        p = (n.metadata or {}).get("parent_id")
        if p: children.setdefault(p, set()).add(nid)
    docs: dict[str, list] = {}

    def of(nid, seen=()) -> list:
        if nid in docs: return docs[nid]
        n = nodes.get(nid)
        if n is None: return []
        if not is_summary(n):
            d = (n.metadata or {}).get("doc_id") or n.ref_doc_id
            out = [d] if d in known else []
        else:
            out = sorted({d for c in children.get(nid, ()) if c not in seen for d in of(c, (*seen, nid))})
        docs[nid] = out
        return out

    for nid in nodes: of(nid)
    levels = {nid: (int(n.metadata["level"]) + 1 if is_summary(n) else 0) for nid, n in nodes.items()}
    return docs, levels


def open_index(workdir):
    with open(os.path.join(workdir, "raptor_li.json")) as f: meta = json.load(f)
    opt = meta["settings"]
    llm = make_llm(opt)
    Settings.llm, Settings.embed_model = llm, make_embed(opt)  # nothing falls back to llama-index's default OpenAI clients
    retriever = RaptorRetriever.from_persist_dir(os.path.join(workdir, "storage"), embed_model=make_embed(opt), llm=llm,
                                                 summary_module=rbase.SummaryModule(llm=llm, summary_prompt=opt["summary_prompt"],
                                                                                    num_workers=MAX_ASYNC),
                                                 tree_depth=int(opt["tree_depth"]), mode="collapsed", verbose=False)
    with open(os.path.join(workdir, "tree.json")) as f: tree = json.load(f)
    nodes = all_nodes(retriever)
    STATE["node_docs"], STATE["levels"] = recover(nodes, tree, set(meta["doc_ids"]))
    STATE.update(retriever=retriever, workdir=workdir, meta=meta)
    return nodes


def tree_counts(nodes) -> dict:
    docs, levels = STATE["node_docs"], STATE["levels"]
    leaves = [n for n in nodes if levels[n] == 0]
    return {"n_units": len(nodes), "n_chunks": len(leaves), "n_summaries": len(nodes) - len(leaves), "levels": max(levels.values(), default=0),
            "nodes_without_doc": sum(1 for n in nodes if not docs.get(n)),
            "chunks_without_doc": sum(1 for n in leaves if not docs.get(n)),
            "docs_without_chunks": len(set(STATE["meta"]["doc_ids"]) - {d for n in leaves for d in docs.get(n, [])} - set(STATE["meta"]["empty_docs"]))}


def op_index(cmd):
    t0 = time.perf_counter()
    workdir = cmd["workdir"]
    os.makedirs(workdir, exist_ok=True)
    opt = settings(cmd.get("options"))
    keep = ("doc_id",)
    docs, empty = [], []
    for d in cmd["docs"]:
        if not d["text"].strip(): empty.append(d["id"]); continue
        docs.append(Document(id_=d["id"], text=d["text"], metadata={"doc_id": d["id"]},
                             excluded_embed_metadata_keys=list(keep), excluded_llm_metadata_keys=list(keep)))
    llm, embed = make_llm(opt), make_embed(opt)
    Settings.llm, Settings.embed_model = llm, embed
    for v in TRACE.values(): v.clear()
    pack = RaptorPack(docs, llm=llm, embed_model=embed, similarity_top_k=2, mode="collapsed", verbose=True,
                      tree_depth=int(opt["tree_depth"]),
                      transformations=[SentenceSplitter(chunk_size=int(opt["chunk_size"]), chunk_overlap=int(opt["chunk_overlap"]))],
                      summary_module=rbase.SummaryModule(llm=llm, summary_prompt=opt["summary_prompt"], num_workers=MAX_ASYNC))
    retriever = pack.retriever
    if len(TRACE["clusters"]) != len(TRACE["summaries"]):  # never expected: then only the pack's parent_id links are used
        print(f"raptor_li: {len(TRACE['clusters'])} clusters but {len(TRACE['summaries'])} summary nodes recorded; using parent_id only", file=sys.stderr)
        children = {}
    else:
        children = {sid: members for (sid, _), members in zip(TRACE["summaries"], TRACE["clusters"])}
    retriever.persist(os.path.join(workdir, "storage"))
    with open(os.path.join(workdir, "tree.json"), "w") as f:
        json.dump({"children": children, "summaries": TRACE["summaries"]}, f)
    with open(os.path.join(workdir, "raptor_li.json"), "w") as f:
        json.dump({"package": PACKAGE, "version": VERSION, "llama_index_core": CORE_VERSION, "settings": opt,
                   "doc_ids": [d["id"] for d in cmd["docs"]], "empty_docs": empty}, f)
    nodes = open_index(workdir)  # open it as `load` would: what a fresh process sees
    members = [m for c in TRACE["clusters"] for m in c]
    return {"stats": {"package": PACKAGE, "version": VERSION, "llama_index_core": CORE_VERSION, "docs": len(cmd["docs"]),
                      "empty_docs": len(empty), "clusters": len(TRACE["clusters"]),
                      "nodes_in_several_clusters": len(members) - len(set(members)),
                      "gmm_regularised_fits": len(TRACE["regularised"]),
                      **tree_counts(nodes), "adapter_seconds": round(time.perf_counter() - t0, 3)}}


def op_query(cmd):
    retriever = STATE["retriever"]
    if retriever is None: raise RuntimeError("no index: send index or load first")
    mode = cmd.get("mode", "collapsed")
    if mode not in MODES: raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    opt = STATE["meta"]["settings"]
    retriever.similarity_top_k = int(cmd.get("top_k") or cmd.get("k") or 5)
    retriever.index._embed_model = make_embed(opt)  # a fresh client on this command's gateway URL (each query runs its own loop)
    t0 = time.perf_counter()
    got = retriever.retrieve(cmd["query"], mode=mode)
    units = []
    for i, nws in enumerate(got):
        n = nws.node
        docs = list(STATE["node_docs"].get(n.node_id, []))
        level = STATE["levels"].get(n.node_id, 0)
        units.append({"kind": "summary" if level else "chunk", "text": n.get_content(), "doc_ids": docs, "unmapped": not docs,
                      "node_id": n.node_id, "level": level, "rank": i + 1,
                      "score": float(nws.score) if nws.score is not None else float(len(got) - i),
                      "peer_score": None if nws.score is None else float(nws.score)})
    return {"units": units, "seconds": round(time.perf_counter() - t0, 4)}


def op_load(cmd) -> dict:
    return {"stats": tree_counts(open_index(cmd["workdir"]))}


def main():
    serve(PACKAGE, VERSION, MODES, {"index": op_index, "load": op_load, "query": op_query}, use_base_url, llama_index_core=CORE_VERSION)


if __name__ == "__main__":
    main()
