"""Damaged files are named and heal: an LLM cache or an embedding cache overwritten in part or whole is moved aside with a
line naming it and rebuilt; a packs file cut in half is moved aside and its packs retrieved again by the next run, and a stage
that cannot rebuild it names the file and the command that does."""
import gzip

import numpy as np
import pytest

from fanin.core.fingerprints import DamagedFile
from fanin.models.llm import LLM, LLMCache
from openai_standin import StandIn

Q = [{"role": "user", "content": "Where is the Eiffel Tower?"}]


def _damage_middle(f):
    data = bytearray(f.read_bytes())
    data[len(data) // 3: len(data) // 3 + 8192] = b"\x07" * 8192
    f.write_bytes(bytes(data))


def _filled_cache(f, n=400):
    c = LLMCache(f)
    for i in range(n): c.put(f"k{i}", {"q": i}, {"text": f"reply {i} " * 40})
    c._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the rows live in the main file, where the damage goes
    c._conn().close()


@pytest.mark.parametrize("damage", ["whole", "middle"])
def test_a_damaged_llm_cache_is_named_moved_aside_and_rebuilt(tmp_path, capsys, damage):
    f = tmp_path / "llm_cache.sqlite"
    _filled_cache(f)
    if damage == "whole": f.write_bytes(b"this is not a database " * 200)
    else: _damage_middle(f)
    with StandIn() as s:
        llm = LLM(provider="vllm", base_url=s.base_url, model=s.model, cache_path=f, context_tokens=4096)
        for i in range(400): llm.cache.get(f"k{i}")   # reading every page finds a damaged one
        r = llm.chat(Q, prompt_version="t@v1")
        assert r.text and not r.cached and len(llm.cache) >= 1
    said = capsys.readouterr().out
    assert str(f) in said and "LLM cache is damaged" in said and "moved it to" in said
    assert list(tmp_path.glob("llm_cache.sqlite.damaged-*")), "the damaged file was deleted, not kept aside"


def test_a_garbage_embedding_cache_is_named_moved_aside_and_rebuilt(tmp_path, capsys):
    from fanin.models.embeddings import EmbeddingCache
    f = tmp_path / "embeddings.sqlite"
    c = EmbeddingCache(f)
    c.put_many("m", {"a": np.ones(4, np.float32)}); c.close()
    f.write_bytes(b"\x00garbage" * 1000)
    c = EmbeddingCache(f)
    assert c.get_many("m", ["a"]) == {}            # empty: the vector is embedded again when asked for
    c.put_many("m", {"a": np.ones(4, np.float32)})
    assert list(c.get_many("m", ["a"])) == ["a"]
    said = capsys.readouterr().out
    assert str(f) in said and "embedding cache is damaged" in said and list(tmp_path.glob("embeddings.sqlite.damaged-*"))


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_a_packs_file_cut_in_half_heals_on_the_next_run(tiny_overrides, capsys):
    from fanin.run.pipeline import run
    ov = tiny_overrides + ["system=bm25"]
    (folder,) = run(ov)
    f = folder / "packs.jsonl.gz"
    whole = gzip.decompress(f.read_bytes())
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    with pytest.raises(DamagedFile, match=r"packs.jsonl.gz is damaged .*--stages retrieve"):
        run(ov, stages=["evaluate"])
    (again,) = run(ov)
    assert again == folder and gzip.decompress(f.read_bytes()) .count(b"\n") == whole.count(b"\n")
    said = capsys.readouterr().out
    assert "packs file is damaged" in said and list(folder.glob("packs.jsonl.gz.damaged-*"))
