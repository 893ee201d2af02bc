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
    "Every notebook: the source ones, the studies (nbs/studies/) and the templates (templates/)."
    for nb in sorted([*(ROOT / "nbs").rglob("*.ipynb"), *(ROOT / "templates").rglob("*.ipynb")]):
        d = json.loads(nb.read_text())
        for c in d["cells"]:
            if c["cell_type"] == "code":
                assert not c.get("outputs") and c.get("execution_count") is None, f"{nb.name} has outputs: run `make export`"
        assert "/work/" not in nb.read_text() and "/home/" not in nb.read_text(), f"{nb.name} holds a machine path"


# the notebooks whose examples read the real WildGraphBench release (the loader's checks on it, the report, the CLI and the bench on it)
REAL_DATA_NOTEBOOKS = ("03_wildgraphbench.ipynb", "08_lab_report.ipynb", "09_cli.ipynb", "10_bench.ipynb")


def _nbdev_test(*args):
    r = subprocess.run([str(BIN / "nbdev-test"), "--n-workers", "1", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_notebook_examples_run():
    "The examples and checks beside the code in nbs/ (the paper notebooks 9x are run by papermill tests instead)."
    _nbdev_test("--skip-file-re", "^9|" + "|".join(n.replace(".", r"\.") for n in REAL_DATA_NOTEBOOKS))


def test_notebook_examples_on_the_real_data_run():
    "The notebooks whose examples read the real data: skipped, saying so, where it is not beside the checkout."
    from conftest import need_real_data
    from fanin.data.wildgraphbench import default_root
    need_real_data(default_root() / "QA", "the real WildGraphBench data (read by " + ", ".join(REAL_DATA_NOTEBOOKS) + ")")
    _nbdev_test("--file-re", "|".join(n.replace(".", r"\.") for n in REAL_DATA_NOTEBOOKS))
