import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "wildgraphbench_tiny"
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def need_real_data(path: Path, what: str):
    """A test that reads the real data: skipped, saying so, on a clone with nothing beside it; failed where the data must be
    there (CI sets FANIN_REQUIRE_REAL_DATA=1: it runs with ../shared beside the clone)."""
    if path.exists(): return
    msg = (f"{what} is expected at {path} (beside the checkout, or where `make data-ready` fetches it); "
           f"this test reads the real data")
    if os.environ.get("FANIN_REQUIRE_REAL_DATA"): pytest.fail(msg + " and FANIN_REQUIRE_REAL_DATA is set")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def real_data_root():
    from fanin.data.wildgraphbench import default_root
    root = default_root()
    need_real_data(root / "QA", "the real WildGraphBench data")
    return root


# The embedder's ONNX graph is built once from the shipped weights (~10 s, 150 MB) into `<paths.outputs>/models`. Tests give each
# run its own `paths.outputs`, so they point the graph at the checkout's `outputs/models` instead: built once for the whole suite.
SHARED_MODELS = f"embedder.model_dir={ROOT / 'outputs' / 'models'}"


@pytest.fixture()
def tiny_overrides(tmp_path):
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}",
            "progress=false", "experiment_name=test", SHARED_MODELS]
