"""Nothing under outputs/ is ever unpickled: an index store or parse cache is read from JSON / npz / scipy / faiss files only.
A crafted pickle planted in a store (whose unpickling would create a marker) is never opened; a store in the old pickle format
(format 1) is rebuilt, and a format this code does not know is refused with a message saying to rebuild."""
import hashlib
import json
import os
import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fanin.systems.graphs import EntityGraphSystem
from fanin.systems.llm_indexes import CommunitySystem, RaptorSystem
from fanin.models.nlp import corpus_key, parse_corpus
from fanin.systems.ppr import PPRSystem
from fanin.systems.router import RouterSystem
from fanin.core.schema import Corpus, Document, Instance
from fanin.systems.flat import BM25System

SRC = Path(__file__).resolve().parents[1] / "src" / "fanin"

TOY = Corpus("toy", [
    Document(id="lennon", title="John Lennon", text="John Lennon was born in Liverpool. Lennon wrote songs with Paul McCartney."),
    Document(id="liverpool", title="Liverpool", text="Liverpool is a city in England. Liverpool lies on the River Mersey."),
    Document(id="other", title="Other", text="Paris is the capital of France, and Berlin is the capital of Germany."),
])
QUERY = "Was John Lennon born in a city of England?"


class _Payload:
    "Unpickling this runs os.mkdir(marker): the stand-in for an attacker's code."
    def __init__(self, marker): self.marker = str(marker)
    def __reduce__(self): return (os.mkdir, (self.marker,))


def plant(path: Path, marker: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Payload(marker)))


def test_the_payload_is_real(tmp_path):
    "The planted files do run code when unpickled (so the tests below would see it)."
    plant(tmp_path / "x.pkl", tmp_path / "probe")
    pickle.loads((tmp_path / "x.pkl").read_bytes())
    assert (tmp_path / "probe").exists()


class _Bench:
    "Questions of known fan-in for the router's classifier."
    def instances(self, domain=None):
        single = ["Where was {} born?", "What did {} write?", "Where did {} live?"]
        multi = ["Compare {} and {}, and list what each of them did.", "How did the work of {} and {} differ, and what did both build?"]
        people = ["John Lennon", "Paul McCartney", "Marie Curie", "Alan Turing", "Ada Lovelace", "Isaac Newton"]
        qs = [Instance(id=f"s{i}{j}", dataset="toy", query=t.format(a), qtype="single-fact", gold_docs=["lennon"], fan_in=1)
              for i, a in enumerate(people) for j, t in enumerate(single)]
        qs += [Instance(id=f"m{i}{j}", dataset="toy", query=t.format(a, people[i - 1]), qtype="multi-fact", gold_docs=["lennon", "other"],
                        fan_in=2) for i, a in enumerate(people) for j, t in enumerate(multi)]
        return qs


class _Ledger:
    def totals(self):
        from fanin.models.llm_cache import LEDGER_FIELDS
        return dict.fromkeys(LEDGER_FIELDS, 0)   # every field the lab's ledger keeps


class _CannedLLM:
    "Stands in for the lab's LLM in the index builds: every summary / report quotes the start of what it was given."
    ledger = _Ledger()
    def map(self, fn, items): return [fn(x) for x in items]
    def chat(self, messages, **kw): return SimpleNamespace(text="About: " + messages[-1]["content"][:120], parsed=None)


class _HashEmbedder:
    "A deterministic 16-dimensional unit vector per text."
    name, dim = "hash16", 16
    def encode(self, texts):
        v = np.stack([np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).standard_normal(self.dim) for t in texts])
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    def count_tokens(self, texts): return sum(len(t.split()) for t in texts)


# each system, and every pickle name its format-1 store had (relative to the store)
SYSTEMS = {
    "bm25": (lambda: BM25System(chunk_tokens=20, chunk_overlap=0), ["bm25.pkl"]),
    "graal": (lambda: EntityGraphSystem(method="graal"), ["parsed.pkl", "graph.pkl"]),
    "ppr": (lambda: PPRSystem(chunk_tokens=20, chunk_overlap=0), ["ppr.pkl"]),
    "router": (lambda: RouterSystem(fine=BM25System(chunk_tokens=20, chunk_overlap=0), coarse=BM25System(name="bm25_coarse"),
                                    dataset=_Bench(), coarse_k=2), ["classifier.pkl", "fine/bm25.pkl", "coarse/bm25.pkl"]),
    "raptor": (lambda: RaptorSystem(_HashEmbedder(), chunk_tokens=10, min_nodes=3, max_levels=2, llm=_CannedLLM()), ["tree.pkl"]),
    "community": (lambda: CommunitySystem(_HashEmbedder(), chunk_tokens=20, chunk_overlap=0, min_size=2, llm=_CannedLLM()), ["community.pkl"]),
}


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_a_planted_pickle_in_a_store_is_never_opened(tmp_path, name):
    make, pkls = SYSTEMS[name]
    store, marker = tmp_path / "store", tmp_path / "pwned"
    built = make().index(TOY, store)
    expected = built.retrieve(QUERY, 3)
    for p in pkls: plant(store / p, marker)
    try: loaded = make().index(TOY, store)
    finally: assert not marker.exists(), f"{name}: loading the store unpickled a planted file"
    assert loaded.stats()["loaded"] and loaded.stats()["format"] == type(loaded).index_format
    assert loaded.retrieve(QUERY, 3) == expected


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_an_old_pickle_store_is_rebuilt_not_unpickled(tmp_path, capsys, name):
    "A format-1 store (index.json without `format`, the data in pickles) is rebuilt in place; its pickles are never read."
    make, pkls = SYSTEMS[name]
    store, marker = tmp_path / "store", tmp_path / "pwned"
    make().index(TOY, store)
    # turn it into what format 1 wrote: the same index.json without `format`, the chunk files, the data as (here: crafted) pickles
    for f in list(store.rglob("*")):
        if f.name == "index.json":
            f.write_text(json.dumps({k: v for k, v in json.loads(f.read_text()).items() if k != "format"}))
        elif f.is_file() and f.name not in ("chunks.npy", "chunk_docs.json") and f.suffix != ".faiss": f.unlink()
    for p in pkls: plant(store / p, marker)
    capsys.readouterr()
    try: s = make().index(TOY, store)
    finally: assert not marker.exists(), f"{name}: an old-format store was unpickled"
    out = capsys.readouterr().out
    assert "older than this code's" in out and "rebuilding" in out and str(store) in out
    assert not s.stats()["loaded"] and json.loads((store / "index.json").read_text())["format"] == type(s).index_format
    assert not list(store.rglob("*.pkl"))  # the old folder was replaced
    assert s.retrieve(QUERY, 3) == make().index(TOY).retrieve(QUERY, 3)


def test_a_format_this_code_does_not_know_is_refused(tmp_path):
    store = tmp_path / "store"
    BM25System(chunk_tokens=20, chunk_overlap=0).index(TOY, store)
    meta = json.loads((store / "index.json").read_text())
    (store / "index.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(RuntimeError, match="rebuild: delete"):
        BM25System(chunk_tokens=20, chunk_overlap=0).index(TOY, store)


def test_the_parse_cache_never_unpickles(tmp_path, capsys):
    "A `.pkl` beside the parse cache, and a pickle posing as the `.npz` cache, are both ignored: the corpus is parsed again."
    cache, marker = tmp_path / "nlp", tmp_path / "pwned"
    stem = f"{TOY.name}-{corpus_key(TOY, block_chars=20_000)}"
    plant(cache / f"{stem}.pkl", marker)
    p = parse_corpus(TOY, cache)
    assert not marker.exists()
    assert (cache / f"{stem}.npz").exists() and parse_corpus(TOY, cache).entities == p.entities  # the new cache loads
    plant(cache / f"{stem}.npz", marker)
    assert parse_corpus(TOY, cache).entities == p.entities and not marker.exists()


def test_no_module_unpickles():
    "A source-level check: nothing in src/fanin can load a pickle."
    bad = re.compile(r"\bpickle\.loads?\b|\bUnpickler\b|from\s+pickle\s+import|allow_pickle\s*=\s*True|read_pickle|joblib\.load")
    hits = [f"{f.name}:{i}: {line.strip()}" for f in sorted(SRC.rglob("*.py"))
            for i, line in enumerate(f.read_text().splitlines(), start=1) if bad.search(line)]
    assert not hits, hits


@pytest.mark.parametrize("damage", ["index.json", "data file"])
def test_a_store_cut_after_its_build_is_rebuilt_not_loaded(tmp_path, capsys, damage):
    "A store counts as built only when index.json matches its completion record and every data file has its recorded size."
    store = tmp_path / "store"
    expected = BM25System(chunk_tokens=20, chunk_overlap=0).index(TOY, store).retrieve(QUERY, 3)
    f = store / "index.json" if damage == "index.json" else store / "bm25" / "data.csc.index.npy"   # bm25s's saved score matrix
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    capsys.readouterr()
    s = BM25System(chunk_tokens=20, chunk_overlap=0).index(TOY, store)
    out = capsys.readouterr().out
    assert "is unfinished" in out and "rebuilding it" in out and f.name in out
    assert not s.stats()["loaded"] and s.retrieve(QUERY, 3) == expected
    assert BM25System(chunk_tokens=20, chunk_overlap=0).index(TOY, store).stats()["loaded"]   # rebuilt whole: loaded next time
