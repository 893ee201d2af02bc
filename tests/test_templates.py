"""The templates (templates/{system,dataset,judge,table}: a notebook and a YAML each) add their component end to end. Copied
into a copy of this checkout with nothing else edited, and exported (`make export`: nbdev-export, then the README's generated
blocks), each is listed by the README's registry and by the docs site, planned by `fanin plan`, and used by a run on a fixture."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TEMPLATES = {"system": "my_system", "dataset": "my_dataset", "judge": "my_judge", "table": "my_table"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    "A copy of the tracked files with the four templates copied in (notebook to nbs/, YAML to configs/GROUP/), then exported."
    dest = tmp_path_factory.mktemp("templated") / "fanin"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    for group, name in TEMPLATES.items():
        (nb,) = (dest / "templates" / group).glob("*.ipynb")
        shutil.copy2(nb, dest / "nbs" / nb.name)
        shutil.copy2(dest / "templates" / group / f"{name}.yaml", dest / "configs" / group / f"{name}.yaml")
    r = subprocess.run([str(BIN / "nbdev-export")], cwd=dest, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _py(dest, "from fanin.doors.readme import write_readme; write_readme()")
    assert r.returncode == 0, r.stderr[-2000:]
    return dest


def _env(dest: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(dest / "src"), "FANIN_HOME": str(dest)}


def _py(dest: Path, code: str):
    return subprocess.run([sys.executable, "-c", code], cwd=dest, env=_env(dest), capture_output=True, text=True, timeout=600)


def _fanin(dest: Path, *args: str):
    return subprocess.run([sys.executable, "-m", "fanin.doors.cli", *args, f"paths.outputs={dest / 'out'}", "progress=false"],
                          cwd=dest, env=_env(dest), capture_output=True, text=True, timeout=600)


def test_exported_into_their_layers(checkout):
    for path in ("systems/my_system.py", "data/my_dataset.py", "judging/my_judge.py", "results/my_table.py"):
        assert (checkout / "src" / "fanin" / path).exists(), f"the template did not export {path}"


def test_the_readme_registry_lists_them(checkout):
    readme = (checkout / "README.md").read_text()
    block = readme.split("<!-- generated: registry -->", 1)[1].split("<!-- /generated: registry -->", 1)[0]
    for group, name in TEMPLATES.items():
        row = next(l for l in block.splitlines() if l.startswith(f"| `{group}` |"))
        assert f"`{name}`" in row, f"README registry row {group} lacks {name}"


def test_the_docs_site_lists_them(checkout, tmp_path):
    names = [nb.stem for g in TEMPLATES for nb in (checkout / "templates" / g).glob("*.ipynb")]
    r = subprocess.run([sys.executable, str(checkout / "docs" / "build.py"), "--out", str(tmp_path / "docs"), "--only", ",".join(names)],
                       cwd=checkout, env=_env(checkout), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert all((tmp_path / "docs" / "site" / f"{n}.html").exists() for n in names), sorted((tmp_path / "docs" / "site").glob("*.html"))


def test_a_template_system_is_planned_and_run(checkout):
    ov = ["experiment=authtrace_fixture", "systems=[my_system]", "k=2"]
    r = _fanin(checkout, "plan", *ov, "--stages", "index,retrieve", "--json", str(checkout / "plan_system.json"))
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((checkout / "plan_system.json").read_text())["rows"]
    assert {x["system"] for x in rows} == {"my_system"} and not any("not estimated" in x["basis"] for x in rows)
    r = _fanin(checkout, "run", *ov, "--stages", "index,retrieve,evaluate")
    assert r.returncode == 0, r.stderr[-2000:]
    (metrics,) = (checkout / "out").glob("authtrace_fixture/*my_system*/metrics.csv")
    m = pd.read_csv(metrics)
    assert len(m) > 0 and (m.status == "ok").all() and m.er.between(0, 1).all()


def test_a_template_dataset_is_planned_and_run(checkout):
    ov = ["dataset=my_dataset", f"dataset.root={checkout / 'templates' / 'dataset' / 'fixture'}", "system=bm25", "k=2",
          "experiment_name=shelf"]
    r = _fanin(checkout, "plan", *ov, "--stages", "index,retrieve")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _fanin(checkout, "run", *ov, "--stages", "index,retrieve,evaluate")
    assert r.returncode == 0, r.stderr[-2000:]
    (metrics,) = (checkout / "out").glob("shelf/*/metrics.csv")
    m = pd.read_csv(metrics)
    assert sorted(m.fan_in) == [1, 2, 2] and m.er.between(0, 1).all()


def test_a_template_judge_grades_answers(checkout, tmp_path):
    "The judge grades answers read from a file (no model runs): the reference's own words pass, a swapped number fails."
    ov = ["experiment=authtrace_fixture", "systems=[oracle]", "k=2"]
    r = _fanin(checkout, "run", *ov, "--stages", "index,retrieve,evaluate")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _py(checkout, "from fanin.core.config import compose; from fanin.run.components import load_dataset; import json; "
                      "ds = load_dataset(compose(['experiment=authtrace_fixture'])); "
                      "print(json.dumps([[i.id, i.answer] for i in ds.instances() if i.answer]))")
    assert r.returncode == 0, r.stderr[-2000:]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"question_id": qid, "answer": ans}) + "\n" for qid, ans in json.loads(r.stdout)))
    r = _fanin(checkout, "run", *ov, "reader=from_file", f"reader.path={answers}", "answer.judges=[my_judge]",
               "--stages", "answer,judge")
    assert r.returncode == 0, r.stderr[-2000:]
    (judged,) = (checkout / "out").glob("authtrace_fixture/*oracle*/answers-*/judged-my_judge-*/judgments.jsonl")
    rows = [json.loads(l) for l in judged.read_text().splitlines()]
    assert rows and all(r["status"] == "ok" and r["scores"]["my_accuracy"] == 100.0 for r in rows)


def test_a_template_table_is_made(checkout):
    ov = ["systems=[bm25]", "k=2"]
    r = _fanin(checkout, "run", "experiment=authtrace_fixture", *ov, "--stages", "index,retrieve,evaluate")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _fanin(checkout, "table", "my_table", *ov)
    assert r.returncode == 0, r.stderr[-2000:]
    t = pd.read_csv(checkout / "out" / "tables" / "my_table.csv", comment="#")
    assert set(t.system) == {"bm25"} and t.complete.between(0, 1).all() and t.questions.sum() > 0


def test_the_templates_examples_run():
    "Each template teaches by example, as the lab's notebooks do: its asserting examples pass."
    nbs = sorted((ROOT / "templates").glob("*/*.ipynb"))
    assert len(nbs) == len(TEMPLATES)
    for nb in nbs:
        r = subprocess.run([str(BIN / "nbdev-test"), "--n-workers", "1", str(nb)], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{nb.relative_to(ROOT)}: " + (r.stdout + r.stderr)[-2000:]
