"""The Dask engine (`engine=dask`, fanin.core.engine): a dense build in shards on a local cluster of worker processes writes the
store one process writes alone. On pages of a real WildGraphBench domain, with the real embedder built on the workers from its
configuration: the same IVF index byte for byte (so the same vectors in the same rows) and the same packs. The engine is chosen
by Hydra and is not part of the index key; a scheduler that does not answer stops in one line."""
import warnings

import faiss
import numpy as np
import pytest

from fanin.core.config import ConfigError, compose, instantiate, system_hash
from fanin.core.engine import DaskEngine
from fanin.core.schema import Corpus
from fanin.run.components import make_system


def test_engine_is_chosen_by_hydra_and_not_part_of_the_index_key():
    alone, sharded = compose(["system=dense"]), compose(["system=dense", "engine=dask", "engine.workers=3"])
    assert alone.system.engine is None and system_hash(alone) == system_hash(sharded)
    eng = make_system(sharded).engine
    assert isinstance(eng, DaskEngine) and eng.workers == 3 and eng._client is None   # nothing started until used
    assert eng.embedder["_target_"] == alone.embedder["_target_"]                     # the workers build the run's embedder
    assert make_system(compose(["system=hybrid", "engine=dask"])).dense.engine is not None


def test_map_keeps_order_and_raises_a_failed_shard():
    def shard(x):
        if x == 7: raise ValueError("shard 7 is bad")
        return -x
    with DaskEngine(workers=2) as eng:
        assert list(eng.map(shard, range(7))) == [-x for x in range(7)]
        with pytest.raises(ValueError, match="shard 7"): list(eng.map(shard, range(10)))


def test_a_scheduler_that_does_not_answer_stops_in_one_line():
    with pytest.raises(ConfigError) as e: list(DaskEngine(address="tcp://127.0.0.1:9", timeout=1).map(abs, [1]))
    assert "\n" not in str(e.value) and "engine.address=null" in str(e.value)


def test_real_data_sharded_dense_build_is_the_single_process_build(real_data_root, tmp_path):
    from fanin.data.wildgraphbench import WildGraphBench
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = WildGraphBench(real_data_root)
    full = ds.corpus("culture")
    corpus = Corpus("culture-slice", list(full)[:12])
    queries = [q.query for q in ds.instances("culture")][:20]
    ann = {"min_windows": 1, "nlist": 4, "nprobe": 2}   # IVF, so that the adds are sharded too; no cache: every window embedded
    alone = instantiate(compose(["system=dense"]).system, cache_path=None, ann=ann).index(corpus, tmp_path / "alone")
    sharded = instantiate(compose(["system=dense", "engine=dask", "engine.shard_size=16"]).system, cache_path=None, ann=ann)
    try: sharded.index(corpus, tmp_path / "sharded")
    finally: sharded.engine.close()
    n = sharded.stats()["n_windows"]
    assert n > 2 * 16 and sharded.stats()["window_index"] == "ivf" and sharded.stats()["misses"] == alone.stats()["misses"]
    assert np.array_equal(faiss.serialize_index(sharded.faiss_index), faiss.serialize_index(alone.faiss_index))
    assert [sharded.retrieve(q, 5) for q in queries] == [alone.retrieve(q, 5) for q in queries]
