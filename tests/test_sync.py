"The notebooks are the source: exporting them must reproduce src/fanin exactly, and they must be clean."
import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(__import__("sys").executable).parent


def test_export_changes_nothing(tmp_path):
    for p in ["nbs", "src", "pyproject.toml"]:
        (shutil.copytree if (ROOT / p).is_dir() else shutil.copy)(ROOT / p, tmp_path / p)
    r = subprocess.run([str(BIN / "nbdev-export")], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    changed = [str(f.relative_to(tmp_path)) for f in (tmp_path / "src" / "fanin").rglob("*.py")
               if f.read_text() != (ROOT / f.relative_to(tmp_path)).read_text()]
    new = [str(f) for f in (tmp_path / "src" / "fanin").rglob("*.py") if not (ROOT / f.relative_to(tmp_path)).exists()]
    assert not changed and not new, f"nbdev-export changes {changed + new}: edit nbs/, run `make export`, commit both"


def test_notebooks_are_clean():
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        d = json.loads(nb.read_text())
        for c in d["cells"]:
            if c["cell_type"] == "code":
                assert not c.get("outputs") and c.get("execution_count") is None, f"{nb.name} has outputs: run `make export`"
        assert "/work/" not in nb.read_text() and "/home/" not in nb.read_text(), f"{nb.name} holds a machine path"


def test_notebook_examples_run():
    "The examples and checks beside the code in nbs/ (the paper notebooks 9x are run by papermill tests instead)."
    r = subprocess.run([str(BIN / "nbdev-test"), "--skip-file-re", "^9", "--n-workers", "1"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
