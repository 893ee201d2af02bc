import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "wildgraphbench_tiny"
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def real_data_root():
    from fanin.wildgraphbench import default_root
    root = default_root()
    if not (root / "QA").is_dir():
        pytest.fail(f"the real WildGraphBench data is expected at {root} (../shared/data/wildgraphbench beside the checkout)")
    return root


@pytest.fixture()
def tiny_overrides(tmp_path):
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}",
            "progress=false", "experiment_name=test"]
