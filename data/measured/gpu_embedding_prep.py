"""Step 1 of the GPU embedding study, run on the lab's machine (CPU): every dense window of the 12 WildGraphBench domains
as the `dense` system cuts them, and the CPU references the GPU's vectors are compared with.

    .venv/bin/python data/measured/gpu_embedding_prep.py OUT_DIR

writes OUT_DIR/windows.json.xz (the window texts) and OUT_DIR/refs.npz (a 2,000-window random sample: its torch fp32 CPU
vectors, the default int8 ONNX vectors where outputs/cache/embeddings.sqlite holds them, 200 random questions with their
fp32 vectors and top-10 windows of the sample). Step 2 is gpu_embedding_study.py, on the GPU machine."""
import json, lzma, random, sqlite3, sys, time
from pathlib import Path

import numpy as np

from fanin.embeddings import TorchMiniLM, text_key
from fanin.systems import DenseSystem, chunk_corpus
from fanin.wildgraphbench import WildGraphBench

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
b = WildGraphBench(domains="all")
texts = []
for d in b.domains:
    c = b.corpus(d)
    s = DenseSystem(embedder=None); s.corpus = c; s.chunks = chunk_corpus(c, s.chunk_tokens, s.chunk_overlap)
    texts += s._windows()[0]
print("windows", len(texts))
with lzma.open(out / "windows.json.xz", "wb", preset=6) as f: f.write(json.dumps(texts).encode())
rng = random.Random(0)
sample = sorted(rng.sample(range(len(texts)), 2000))
con = sqlite3.connect("outputs/cache/embeddings.sqlite")
int8 = []
for i in sample:
    r = con.execute("select vec from embeddings where model=? and key=?", ("all-MiniLM-L6-v2/onnx-fused-int8", text_key(texts[i]))).fetchone()
    int8.append(np.frombuffer(r[0], dtype=np.float32) if r else np.full(384, np.nan, np.float32))
int8 = np.stack(int8)
print("int8 vectors found in the cache", int((~np.isnan(int8[:, 0])).sum()))
e = TorchMiniLM()
t0 = time.perf_counter(); fp32 = e.encode([texts[i] for i in sample]); print("torch fp32 CPU s", time.perf_counter() - t0)
qs = [i.query for i in b.instances()]
qs = [qs[i] for i in sorted(rng.sample(range(len(qs)), 200))]
q32 = e.encode(qs)
np.savez(out / "refs.npz", sample=np.array(sample), int8=int8, fp32=fp32, questions=np.array(qs), q_fp32=q32,
         top10_fp32=np.argsort(-(q32 @ fp32.T), axis=1)[:, :10])
