"End to end on the hand-made fixture: every system, resumability, manifest, tables, CLI."
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fanin.core.config import compose
from fanin.run.pipeline import run
from fanin.run.components import load_dataset
from fanin.core.schema import Pack, read_jsonl

SYSTEMS = "systems=[bm25,dense,long_context,oracle,closed_book]"


def test_all_systems_end_to_end(tiny_overrides, tmp_path):
    over = tiny_overrides + [SYSTEMS]
    folders = run(over)
    assert [f.name.split("-")[2] for f in folders] == ["bm25", "dense", "long_context", "oracle", "closed_book"]
    for f in folders:
        assert {"manifest.json", "packs.jsonl.gz", "metrics.csv"} <= {p.name for p in f.iterdir()}
        man = json.loads((f / "manifest.json").read_text())
        assert man["data"]["qa_sha1"] and man["versions"]["numpy"] and man["config"]["k"] == 5 and man["git_commit"]
        packs = read_jsonl(f / "packs.jsonl.gz", Pack)
        assert len(packs) == 4
        for p in packs:
            assert all(u.doc_id and u.rank >= 1 and isinstance(u.score, float) for u in p.units)
        assert (f / "tables" / "by_fan_in_bin.csv").exists()
    m = {f.name.split("-")[2]: pd.read_csv(f / "metrics.csv").set_index("instance_id") for f in folders}
    oracle = m["oracle"].dropna(subset=["er"])
    assert (oracle.er == 1).all() and (oracle.ep == 1).all()
    assert (m["closed_book"].pack_units == 0).all() and m["closed_book"].ep.isna().all()
    # the question whose reference resolves to nothing is kept, with undefined metrics
    assert m["bm25"].er.isna().sum() == 1 and len(m["bm25"]) == 4
    # bm25 finds the Vicente page for the Vicente question
    bench = load_dataset(compose(tiny_overrides))
    q = next(i for i in bench.instances() if "Vicente" in i.query)
    assert m["bm25"].loc[q.id, "er"] == 1.0 and m["dense"].loc[q.id, "er"] == 1.0


def test_resume_after_interruption(tiny_overrides):
    over = tiny_overrides + ["system=bm25"]
    f = run(over)[0]
    packs = read_jsonl(f / "packs.jsonl.gz", Pack)
    # simulate a run killed after two questions, mid-way through writing the third line
    (f / "packs.jsonl.gz").unlink(); (f / "metrics.csv").unlink()
    lines = [p.model_dump_json() for p in packs[:2]]
    (f / "packs.partial.jsonl").write_text("\n".join(lines) + "\n" + packs[2].model_dump_json()[:25])
    f2 = run(over)[0]
    assert f2 == f and not (f / "packs.partial.jsonl").exists()
    again = read_jsonl(f / "packs.jsonl.gz", Pack)
    assert [p.instance_id for p in again] == [p.instance_id for p in packs]
    assert [u.doc_id for u in again[3].units] == [u.doc_id for u in packs[3].units]


def test_failed_retrieval_is_recorded_not_zeroed(tiny_overrides, monkeypatch):
    from fanin.systems import flat as systems
    def boom(self, query, k, instance=None):
        if "Saola" in query: raise RuntimeError("index exploded")
        return []
    monkeypatch.setattr(systems.ClosedBookSystem, "retrieve", boom)
    from fanin.run.pipeline import StageFailed
    with pytest.raises(StageFailed, match="1 of 4 questions failed"): run(tiny_overrides + ["system=closed_book"])
    (f,) = [p.parent for p in (Path(tiny_overrides[2].split("=", 1)[1]) / "test").glob("*closed_book*/metrics.csv")]
    m = pd.read_csv(f / "metrics.csv")
    failed = m[m.status == "failed"]
    assert len(m) == 4 and len(failed) == 1 and "index exploded" in failed.error.iloc[0] and failed.er.isna().all()


def test_cli_run_stats_and_report(tiny_overrides, tmp_path):
    fanin = [sys.executable, "-m", "fanin.doors.cli"]
    r = subprocess.run(fanin + ["run", "system=bm25", *tiny_overrides], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(fanin + ["stats", *tiny_overrides], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("domain,qtype,questions,fan_in_1")
    assert "nature,all,4,1,1,1,0,0,1" in r.stdout
    r = subprocess.run(fanin + ["report", "system=bm25", *tiny_overrides], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = (tmp_path / "outputs" / "report.md").read_text()
    assert "## By fan-in bin" in report and "bm25" in report and "Setting" in report
    assert (tmp_path / "outputs" / "figures" / "test-nature-bm25_er_ep_by_fan_in.png").stat().st_size > 5000   # a one-system run names its system


def test_papermill_notebook_runs(tiny_overrides, tmp_path):
    import papermill as pm
    from fanin.core.config import repo_root
    out = tmp_path / "nb.ipynb"
    pm.execute_notebook(str(repo_root() / "nbs" / "91_reproduce_wildgraphbench_retrieval.ipynb"), str(out),
                        parameters={"overrides": tiny_overrides + ["system=bm25"]}, kernel_name="python3", progress_bar=False,
                        cwd=str(repo_root() / "nbs"))
    assert (tmp_path / "outputs" / "test").is_dir()
    nb = json.loads(out.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), "papermill left cells unexecuted"
    assert not any(o.get("output_type") == "error" for c in code for o in c.get("outputs", [])) and "Traceback" not in out.read_text()
    assert list((tmp_path / "outputs" / "test").rglob("metrics.csv")), "the notebook's run wrote no metrics"
    shown = json.dumps([c.get("outputs", []) for c in code])
    assert "fan_in_bin" in shown and "single" in shown, "the by-fan-in-bin table is not in the executed notebook"


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_answer_domains_restrict_the_answer_sample_and_refuse_what_answers_nothing():
    "answer.domains: the answered domains among the run's (the paper default answers 3 of 12); a typo or an empty overlap stops."
    from fanin.run.components import load_dataset
    from fanin.core.config import ConfigError, compose
    from fanin.run.pipeline import answer_sample
    fixture = Path(__file__).parent / "fixtures" / "wildgraphbench_tiny"
    base = [f"dataset.root={fixture}", "dataset.domains=[nature]", "answer.per_domain_type=null"]
    cfg = compose(base)
    ds = load_dataset(cfg)
    every = answer_sample(cfg, ds)
    assert every and answer_sample(compose(base + ["answer.domains=[nature,culture]"]), ds) == every   # culture: not in this run
    with pytest.raises(ConfigError, match="none is among the run's domains"):
        answer_sample(compose(base + ["experiment=paper", "answer.per_domain_type=null"]), ds)   # paper answers 3 others
    with pytest.raises(ConfigError, match=r"\['natur'\] not a domain of wildgraphbench"):
        answer_sample(compose(base + ["answer.domains=[natur]"]), ds)
