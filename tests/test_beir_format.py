"""A dataset in BEIR's layout loads on the Dataset contract and runs end to end (the hand-written fixture)."""
import pandas as pd

from fanin.pipeline import run


def test_a_beir_layout_dataset_loads_and_runs(tmp_path):
    from fanin.config import repo_root
    over = [f"dataset=beir", f"dataset.root={repo_root() / 'tests' / 'fixtures' / 'beir_tiny'}", f"paths.outputs={tmp_path / 'outputs'}",
            "progress=false", "experiment_name=test", "system=bm25", "k=2", "k_summary=2"]
    f = run(over)[0]
    m = pd.read_csv(f / "metrics.csv").set_index("instance_id")
    assert list(m.fan_in) == [1, 2, 2] and (m.status == "ok").all()
    assert m.loc["typhoons/q1", "er"] == 1.0   # the Vicente query finds the Vicente passage
    assert (f / "tables" / "by_fan_in_bin.csv").exists()
