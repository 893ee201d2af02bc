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


# The embedder's ONNX graph is built once from the shipped weights (~10 s, 150 MB) into `<paths.outputs>/models`. Tests give each
# run its own `paths.outputs`, so they point the graph at the checkout's `outputs/models` instead: built once for the whole suite.
SHARED_MODELS = f"embedder.model_dir={ROOT / 'outputs' / 'models'}"


@pytest.fixture()
def tiny_overrides(tmp_path):
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}",
            "progress=false", "experiment_name=test", SHARED_MODELS]
