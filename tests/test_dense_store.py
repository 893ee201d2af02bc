"""The dense system's store: its window index is memory-mapped at load (`read_window_index`), and its build streams the window
vectors through a file a batch at a time. On every real WildGraphBench domain, an index built in many batches, saved and mapped
back ranks exactly as one built whole in memory: the same chunks with the same scores, exact search and IVF alike."""
import warnings

import numpy as np

from fanin.systems.flat import DenseSystem, VectorFile


class ByteBigrams:
    "A fast stand-in embedder (no model): each text's byte bigrams hashed into `dim` buckets, L2-normalised."
    name, dim, max_tokens = "byte-bigrams", 96, 256

    def encode(self, texts, progress=False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            b = np.frombuffer(t.lower().encode(), dtype=np.uint8).astype(np.int64)
            if len(b) > 1: out[i] = np.bincount((b[:-1] * 257 + b[1:]) % self.dim, minlength=self.dim)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def count_tokens(self, texts): return sum(len(t.split()) for t in texts)


def ranking(system, queries, k=10):
    return [[(u.meta["chunk"], u.score) for u in system.retrieve(q, k)] for q in queries]


def test_real_data_mapped_dense_index_ranks_as_built_on_every_domain(real_data_root, tmp_path):
    from fanin.data.wildgraphbench import DOMAINS, WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = WildGraphBench(real_data_root)
    emb = ByteBigrams()
    for d in DOMAINS:
        c = ds.corpus(d)
        qs = [q.query for q in ds.instances(d)][::7][:12]
        ann = {"min_windows": 1, "nlist": 16, "nprobe": 4} if d == DOMAINS[0] else None   # one domain searched by IVF
        cache = tmp_path / f"{d}.sqlite"
        whole = DenseSystem(emb, ann=ann, cache_path=cache).index(c)   # no store: built in memory in one piece, filling the cache
        streamed = DenseSystem(emb, ann=ann, cache_path=cache)          # every vector read from the cache into its row
        streamed._EMBED_BATCH = 997
        streamed.index(c, tmp_path / d)
        reopened = DenseSystem(emb, ann=ann).index(c, tmp_path / d)
        assert reopened.stats()["loaded"] and isinstance(reopened.window_owner, np.memmap), d
        assert not (tmp_path / d / "vectors.f32").exists() and streamed.stats()["misses"] == 0 < whole.stats()["misses"], d
        assert streamed.stats()["n_windows"] == whole.faiss_index.ntotal == reopened.faiss_index.ntotal, d
        want = ranking(whole, qs)
        assert ranking(streamed, qs) == want and ranking(reopened, qs) == want, d


def test_vector_file_reads_back_what_was_written(tmp_path):
    vf = VectorFile(tmp_path / "v.f32", 4)
    m = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    for s in range(0, 10, 3): vf.append(m[s:s + 3])
    assert len(vf) == 10 and np.array_equal(vf.read(0, 10), m) and np.array_equal(vf.rows([9, 2, 2]), m[[9, 2, 2]])
    assert np.array_equal(np.vstack(list(vf.batches(4))), m) and vf.read(8, 20).shape == (2, 4)
