"""The DVC pipeline runs where git puts it: every command reaches the lab's environment through ${venv} and the data through
${data} (params.yaml), so a queued experiment (`dvc exp run --queue`, run in a temporary copy of the repository) can be given
absolute paths with -S. A stage that hard-codes `.venv/bin/` or `../shared` would only run in the workspace."""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_every_stage_reaches_venv_and_data_through_params():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert params["venv"] == ".venv" and params["data"] == "../shared/data/wildgraphbench"
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    bad = []
    for name, st in stages.items():
        if ".venv/" in st["cmd"] or "${venv}/bin/" not in st["cmd"]: bad.append(f"{name}: cmd {st['cmd'][:80]!r}")
        for d in st.get("deps", []):
            if "shared/" in str(d) and not str(d).startswith(("${data}", "${hipporag_data}")): bad.append(f"{name}: dep {d}")
    assert not bad, "stages that would not run in a queued experiment's copy of the repository:\n" + "\n".join(bad)
    assert "vars" not in yaml.safe_load((ROOT / "dvc.yaml").read_text()), "params.yaml holds venv and data (DVC loads it for ${...})"
