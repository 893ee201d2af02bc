"Tests of fanin.models.embeddings with the real models shipped by installed packages (no hub, no mocks)."
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest

from fanin.models.embeddings import EmbeddingCache, OnnxMiniLM, TorchMiniLM, embed_with_cache, int8_kernel, text_key

SENTENCES = [
    "The cat sat on the mat.",
    "Marvel Studios released Ant-Man in July 2015, directed by Peyton Reed.",
    "How many Academy Awards did the film win?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
    "Bitte schließen Sie die Tür, wenn Sie gehen.",
    "Le musée du Louvre est le plus grand musée d'art du monde.",
    "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "Stock prices fell 3.2% after the quarterly earnings report on 2024-01-15.",
    "I can't believe it's not butter!!! :)",
    "Quantum chromodynamics describes the strong interaction between quarks and gluons.",
    "Kendrick Lamar won the Pulitzer Prize for Music for DAMN. in 2018.",
    "a",
    "",
    "The Beatles recorded Abbey Road at EMI Studios in London in 1969. " * 30,  # truncated at 256 word pieces
    "Terms of Service | Privacy Policy | Cookie Settings | Contact Us",
    "The mitochondria is the powerhouse of the cell.",
    "東京は日本の首都です。",
    "Vaccines train the immune system to recognise pathogens without causing disease.",
    "What is the capital of Australia? Canberra, not Sydney.",
]

# Measured (nbs/studies/embeddings_backends.ipynb): on these 20 texts the fused fp32 ONNX graph agrees with PyTorch to a cosine of
# 0.99999 or more on every CPU (same model, float rounding only). The int8 graph's agreement depends on the CPU's kind of int8
# product (`int8_kernel`): with VNNI (AVX-512) mean 0.9934, minimum 0.980; without (AVX2, measured on an emulated Haswell CPU,
# qemu-x86_64 -cpu Haswell, where onnxruntime dispatches to its AVX2 kernels) mean 0.9907, minimum 0.9708, and 0.9732 on 512
# corpus windows on a real AVX2 EPYC. The int8 thresholds sit below both kinds with room (min 0.95) and far above what a broken
# pipeline gives: mean pooling that counts the padding -> mean 0.48, CLS pooling -> mean 0.51. The fp32 threshold catches
# anything that changes the model itself (tokenizer truncation at 128 -> 0.980 on the long text).
FP32_COS_MIN = 0.9999
INT8_MEAN_COS_MIN, INT8_MIN_COS_MIN = 0.985, 0.95


@pytest.fixture(scope="module")
def torch_emb():
    return TorchMiniLM(batch_size=8)


@pytest.fixture(scope="module")
def onnx_emb():
    return OnnxMiniLM()  # the default: fused graph, int8 weights, one text per run


@pytest.fixture(scope="module")
def onnx_fp32():
    return OnnxMiniLM(quantize=False, batch_size=8)


@pytest.mark.parametrize("which", ["torch_emb", "onnx_emb", "onnx_fp32"])
def test_shapes_and_normalisation(which, request):
    emb = request.getfixturevalue(which)
    assert emb.dim == 384 and emb.max_tokens == 256 and emb.name.startswith("all-MiniLM-L6-v2/")
    v = emb.encode(SENTENCES)
    assert v.shape == (len(SENTENCES), 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    e = emb.encode([])
    assert e.shape == (0, 384) and e.dtype == np.float32
    # order is kept: each row equals the text embedded alone
    for i in (0, 7, 14):
        assert np.allclose(emb.encode([SENTENCES[i]])[0], v[i], atol=1e-4)
    assert emb.count_tokens(["Hello world"]) == 4  # [CLS] hello world [SEP]
    assert emb.count_tokens([SENTENCES[14]]) == 256  # truncated
    assert emb.count_tokens([]) == 0


def test_backends_agree(torch_emb, onnx_emb, onnx_fp32):
    assert len({torch_emb.name, onnx_emb.name, onnx_fp32.name}) == 3  # never share cache entries
    t = torch_emb.encode(SENTENCES)
    exact = (t * onnx_fp32.encode(SENTENCES)).sum(axis=1)
    assert exact.min() > FP32_COS_MIN, exact
    cos = (t * onnx_emb.encode(SENTENCES)).sum(axis=1)
    assert cos.mean() > INT8_MEAN_COS_MIN, cos
    assert cos.min() > INT8_MIN_COS_MIN, cos
    # and they rank the same nearest neighbour for a query
    q = "Which film did Peyton Reed direct for Marvel?"
    for emb in (torch_emb, onnx_emb, onnx_fp32):
        assert int(np.argmax(emb.encode(SENTENCES) @ emb.encode([q])[0])) == 1


def test_gpu_feeding_path_computes_sentence_transformers_vectors(torch_emb):
    "The GPU path's own batching (one tokenisation, longest first, its own padding), run here on the CPU in fp32: the same vectors."
    v, g = torch_emb.encode(SENTENCES), torch_emb._encode_gpu(SENTENCES)
    assert g.shape == v.shape and g.dtype == np.float32
    assert (v * g).sum(axis=1).min() > FP32_COS_MIN


def test_device_choice_names_the_vectors_and_refuses_a_missing_gpu(torch_emb):
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from fanin.core.config import repo_root
    from fanin.models.embeddings import resolve_device
    assert torch_emb.name == "all-MiniLM-L6-v2/torch-fp32" and torch_emb.device_name == "cpu"  # the CPU's cache key is unchanged
    with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"): resolve_device("tpu")
    with pytest.raises(ValueError, match="embedder.dtype='int8'"): TorchMiniLM(dtype="int8")
    gpu_cfg = OmegaConf.load(repo_root() / "configs" / "embedder" / "minilm_gpu.yaml")
    if torch.cuda.is_available():
        assert instantiate(gpu_cfg).name == "all-MiniLM-L6-v2/torch-fp16-cuda"
    else:
        assert resolve_device("auto") == "cpu"
        with pytest.raises(Exception, match="sees no CUDA device here: use embedder.device=cpu"): instantiate(gpu_cfg)


def test_an_index_names_the_embedders_hardware_when_it_is_not_the_cpu(torch_emb, monkeypatch):
    "The setting card reads the index's `embedder`: a GPU build says which GPU; a CPU build reads as it always did."
    from fanin.core.schema import Corpus, Document
    from fanin.systems.flat import DenseSystem
    corpus = Corpus("toy", [Document(id=f"d{i}", text=t) for i, t in enumerate(SENTENCES[:4])])
    assert DenseSystem(torch_emb).index(corpus).stats()["embedder"] == "all-MiniLM-L6-v2/torch-fp32"
    monkeypatch.setattr(torch_emb, "device_name", "NVIDIA H100 80GB HBM3")   # what TorchMiniLM(device="cuda") records
    assert DenseSystem(torch_emb).index(corpus).stats()["embedder"] == "all-MiniLM-L6-v2/torch-fp32 on NVIDIA H100 80GB HBM3"


def test_int8_vectors_name_the_cpus_kind_of_int8_product(monkeypatch):
    """int8 vectors from a VNNI CPU and from one without differ beyond rounding (cosine min 0.966 between the two on these texts),
    so they must never share a cache key; fp32 vectors are the same on both and keep one name."""
    assert int8_kernel() in ("vnni", "novnni")  # x86-64 (the lab's machines and CI)
    import fanin.models.embeddings as E
    names = {}
    for kernel in ("vnni", "novnni"):
        monkeypatch.setattr(E, "int8_kernel", lambda k=kernel: k)
        names[kernel] = (OnnxMiniLM(threads=1).name, OnnxMiniLM(threads=1, quantize=False).name)
    assert names["vnni"][0] == "all-MiniLM-L6-v2/onnx-fused-int8" and names["novnni"][0] == "all-MiniLM-L6-v2/onnx-fused-int8-novnni"
    assert names["vnni"][1] == names["novnni"][1] == "all-MiniLM-L6-v2/onnx-fused-fp32"


def test_int8_vector_does_not_depend_on_neighbours(onnx_emb):
    # dynamic int8 quantisation scales activations per run; one text per run keeps each text's vector its own
    alone = np.stack([onnx_emb.encode([s])[0] for s in SENTENCES[:6]])
    assert np.array_equal(onnx_emb.encode(SENTENCES[:6]), alone)
    assert np.array_equal(onnx_emb.encode(SENTENCES[3:6] + SENTENCES[:3]), np.concatenate([alone[3:], alone[:3]]))


@pytest.mark.parametrize("batch_size", [1, 3])
def test_parallel_sessions_give_one_sessions_vectors(batch_size):
    # `threads` single-threaded sessions share the batches; each row must land where it belongs, bit for bit as one session gives
    texts = SENTENCES * 3  # 60 texts: many batches per worker, uneven lengths
    one = OnnxMiniLM(threads=1, batch_size=batch_size)
    two = OnnxMiniLM(threads=2, batch_size=batch_size)
    assert np.array_equal(two.encode(texts), one.encode(texts))
    assert one.bulk_sessions is None and len(two.bulk_sessions) == 2  # one thread needs no second kind of session
    # a single text runs on the two-thread session: the same vector as a one-thread session gives
    fresh = OnnxMiniLM(threads=2, batch_size=batch_size)
    assert np.array_equal(fresh.encode(texts[:1]), one.encode(texts[:1])) and fresh.bulk_sessions is None


def test_graph_is_built_once(tmp_path):
    from fanin.models.embeddings import minilm_onnx
    p = minilm_onnx(folder=tmp_path)
    assert p.name == "all-MiniLM-L6-v2.fused-int8.onnx" and (tmp_path / "all-MiniLM-L6-v2.fused-fp32.onnx").exists()
    mtime = p.stat().st_mtime_ns
    assert minilm_onnx(folder=tmp_path) == p and p.stat().st_mtime_ns == mtime
    assert sorted(x.name for x in tmp_path.iterdir()) == ["all-MiniLM-L6-v2.fused-fp32.onnx", "all-MiniLM-L6-v2.fused-int8.onnx"]


def test_cache_round_trip(tmp_path, onnx_emb):
    cache = EmbeddingCache(tmp_path / "nested" / "dir" / "emb.sqlite")
    m1, s1 = embed_with_cache(onnx_emb, SENTENCES, cache, commit_every=7)
    assert (s1["hits"], s1["misses"]) == (0, len(SENTENCES)) and s1["embedded_tokens"] > 0
    assert len(cache) == len(SENTENCES)
    # a fresh handle on the same file (another process would see the same)
    m2, s2 = embed_with_cache(onnx_emb, SENTENCES, EmbeddingCache(cache.path))
    assert (s2["hits"], s2["misses"], s2["embedded_tokens"]) == (len(SENTENCES), 0, 0)
    assert np.array_equal(m1, m2)
    # entries are per model
    assert EmbeddingCache(cache.path).get_many("another/model", [text_key(SENTENCES[0])]) == {}


def test_duplicate_embedded_once(tmp_path, onnx_emb):
    calls = []

    class Counting:
        name, dim, max_tokens = onnx_emb.name, onnx_emb.dim, onnx_emb.max_tokens
        def encode(self, texts, progress=False):
            calls.append(list(texts))
            return onnx_emb.encode(texts)
        def count_tokens(self, texts): return onnx_emb.count_tokens(texts)

    texts = ["same text", "other text", "same text", "same text"]
    m, s = embed_with_cache(Counting(), texts, EmbeddingCache(tmp_path / "c.sqlite"))
    assert sum(len(c) for c in calls) == 2 and (s["misses"], s["distinct"], s["texts"]) == (2, 2, 4)
    assert np.array_equal(m[0], m[2]) and np.array_equal(m[0], m[3]) and not np.array_equal(m[0], m[1])
    # without a cache too
    calls.clear()
    m, s = embed_with_cache(Counting(), texts, None)
    assert sum(len(c) for c in calls) == 2 and s["hits"] == 0


def test_resume_after_interruption(tmp_path, onnx_emb):
    class Failing:
        name, dim, max_tokens = onnx_emb.name, onnx_emb.dim, onnx_emb.max_tokens
        n = 0
        def encode(self, texts, progress=False):
            Failing.n += 1
            if Failing.n == 3: raise KeyboardInterrupt
            return onnx_emb.encode(texts)
        def count_tokens(self, texts): return onnx_emb.count_tokens(texts)

    cache = EmbeddingCache(tmp_path / "c.sqlite")
    with pytest.raises(KeyboardInterrupt):
        embed_with_cache(Failing(), SENTENCES, cache, commit_every=5)
    assert len(cache) == 10  # the two finished slices were kept
    _, s = embed_with_cache(onnx_emb, SENTENCES, cache, commit_every=5)
    assert (s["hits"], s["misses"]) == (10, 10)


def _writer(path, w):
    c = EmbeddingCache(path)
    for j in range(20):
        c.put_many("m", {f"{w}-{j}-{i}": np.full(8, i, np.float32) for i in range(10)})


def test_concurrent_writer_processes(tmp_path):
    import multiprocessing as mp
    path = tmp_path / "c.sqlite"
    EmbeddingCache(path)
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=_writer, args=(path, w)) for w in range(3)]
    for p in ps: p.start()
    for p in ps: p.join(60)
    assert all(p.exitcode == 0 for p in ps)
    assert len(EmbeddingCache(path)) == 3 * 20 * 10
