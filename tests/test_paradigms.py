"""The peers-vs-lab notebook (nbs/95, the DVC stage `peers`) end to end through papermill on the fixture corpus: BM25 and the
real Mem0 package (raw mode: passages kept verbatim, so the stand-in model server is asked nothing) beside a lab system that was
not run. The paradigm table (the registered table `paradigms`, written under the notebook's `out_name`) holds Mem0's rows by fan-in bin with its package version and says the lab's `memory` was not run
(never zeros); the pack composition counts Mem0's units as passages."""
import pytest

from fanin.results.lab_report import read_table

from openai_standin import StandIn
from test_peer_mem0 import mem0_reply
from test_peers import FIXTURE, built_env


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_the_peers_notebook_writes_paradigm_tables(tmp_path):
    import papermill as pm
    from fanin.core.config import repo_root, resolve_path
    built_env("mem0")
    out = tmp_path / "out"
    with StandIn(model="standin-paradigms", reply=mem0_reply) as s:
        ov = ["experiment=peers", "progress=false", f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={out}",
              "systems=[bm25,mem0]", "llm=vllm", f"llm.base_url={s.base_url}",
              f"llm.model={s.model}", f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"]
        pm.execute_notebook(str(repo_root() / "nbs" / "95_peers_vs_lab.ipynb"), str(tmp_path / "peers.ipynb"),
                            parameters={"overrides": ov, "out_name": "pv"}, progress_bar=False, kernel_name="python3")
        assert not s.chats(), "Mem0 in raw mode asks the model nothing"
    tabs = out / "tables"
    assert not (tabs / "pv_tree.csv").exists(), "a paradigm none of whose systems ran gets no table"
    assert set(read_table(tabs / "pv.csv").paradigm) == {"community_graph", "tree", "memory", "ppr_graph"}, "the whole table names every paradigm"
    t = read_table(tabs / "pv_memory.csv")
    assert set(t[t.status == "not run"].system) == {"memory", "mem0_infer"}
    m = t[t.system == "mem0"].set_index("fan_in_bin")
    assert "all" in m.index and m.loc["all", "questions"] > 0 and 0 <= m.loc["all", "er"] <= 1
    assert m.loc["all", "package"].startswith("mem0ai ") and m.loc["all", "unmapped_units"] == 0
    assert m.loc["all", "index_llm_calls"] == 0
    comp = read_table(tabs / "pv_composition.csv")
    assert set(comp[comp.system == "mem0"].kind) == {"passage"} and set(comp.system) == {"bm25", "mem0"}
