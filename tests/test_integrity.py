"""Results cannot go stale: a run into an existing outputs folder after a change of the data, of fanin's code or of a model
file recomputes what depends on it (or refuses, under integrity.on_change=refuse), and never leaves a metrics.csv made
from the old inputs under a manifest naming the new ones. Each test fails on the code before stamps existed."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import fanin.pipeline as pipeline
from fanin.cli import main
from fanin.fingerprints import StaleOutputs, code_fingerprint, read_stamps
from fanin.pipeline import index_store, run
from fanin.schema import Pack, read_jsonl

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "wildgraphbench_tiny"


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(FIXTURE, root)
    return root


def _over(tmp_path, root, *more):
    return [f"dataset.root={root}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}", "progress=false",
            "experiment_name=t", "system=bm25", "k=1", "k_summary=1", *more]


def _repoint_first_question(root: Path):
    "A data change that changes the gold: the single-fact question now cites the Saola page instead of Vicente's."
    q = root / "QA" / "nature" / "questions.jsonl"
    q.write_text(q.read_text().replace('"ref_urls": ["https://example.org/vicente"]', '"ref_urls": ["https://example.org/saola"]', 1))


def _metrics(f: Path) -> pd.DataFrame:
    return pd.read_csv(f / "metrics.csv").drop(columns=["retrieve_ms"]).sort_values("instance_id").reset_index(drop=True)


def test_a_data_change_recomputes_and_equals_a_fresh_run(data, tmp_path, capsys):
    f = run(_over(tmp_path, data))[0]
    before = _metrics(f)
    _repoint_first_question(data)
    f2 = run(_over(tmp_path, data))[0]
    assert f2 == f and "were made from other inputs: questions" in capsys.readouterr().out
    after = _metrics(f)
    assert not after.equals(before)
    fresh = _metrics(run(_over(tmp_path / "fresh", data))[0])
    pd.testing.assert_frame_equal(after, fresh)
    manifest = json.loads((f / "manifest.json").read_text())
    assert manifest["inputs"] == read_stamps(f)["retrieve"]          # the manifest names the inputs the numbers came from


def test_a_page_change_rebuilds_the_index(data, tmp_path):
    over = _over(tmp_path, data)
    run(over)
    from fanin.config import compose
    store = index_store(compose(over), "nature")
    old = json.loads((store / "inputs.json").read_text())["index"]["corpus"]
    page = next((data / "corpus" / "nature").rglob("Season summary 2012.txt"))
    page.write_text(page.read_text() + "\nA late addition to the page.")
    run(over)
    new = json.loads((store / "inputs.json").read_text())["index"]["corpus"]
    assert new != old


def test_a_code_change_recomputes(data, tmp_path, monkeypatch, capsys):
    f = run(_over(tmp_path, data))[0]
    packs_mtime = (f / "packs.jsonl.gz").stat().st_mtime_ns
    monkeypatch.setattr(pipeline, "code_fingerprint", lambda: "0123456789abcdef")
    run(_over(tmp_path, data))
    assert "code " in capsys.readouterr().out
    assert (f / "packs.jsonl.gz").stat().st_mtime_ns != packs_mtime
    assert read_stamps(f)["retrieve"]["code"] == "0123456789abcdef"


def test_refuse_keeps_the_old_outputs_and_names_what_changed(data, tmp_path, capsys):
    f = run(_over(tmp_path, data))[0]
    before = (f / "metrics.csv").read_bytes()
    _repoint_first_question(data)
    with pytest.raises(StaleOutputs, match=r"questions .*integrity.on_change=recompute"):
        run(_over(tmp_path, data, "integrity.on_change=refuse"))
    assert (f / "metrics.csv").read_bytes() == before
    with pytest.raises(SystemExit) as e: main(["run", *_over(tmp_path, data, "integrity.on_change=refuse")])
    assert e.value.code != 0 and "made from other inputs" in capsys.readouterr().err


def test_an_answer_only_rerun_after_a_data_change_asks_for_retrieval(data, tmp_path):
    run(_over(tmp_path, data))
    _repoint_first_question(data)
    from fanin.config import ConfigError
    with pytest.raises(ConfigError, match="run the retrieve stage"):
        run(_over(tmp_path, data, "answer.judges=[proxy]"), stages=["judge"])


def test_the_code_fingerprint_sees_every_package_file(tmp_path, monkeypatch):
    import fanin
    pkg = tmp_path / "fanin"
    shutil.copytree(Path(fanin.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fanin, "__file__", str(pkg / "__init__.py"))
    a = code_fingerprint.__wrapped__()
    (pkg / "systems.py").write_text((pkg / "systems.py").read_text() + "\n# a change\n")
    assert code_fingerprint.__wrapped__() != a


# --- failures heal -------------------------------------------------------------------------------------------------------

def _flaky(monkeypatch, when):
    from fanin import systems
    real = systems.BM25System.retrieve
    def retrieve(self, query, k, instance=None):
        if when(query): raise ConnectionError("transient: index server unreachable")
        return real(self, query, k, instance)
    monkeypatch.setattr(systems.BM25System, "retrieve", retrieve)


def test_a_rerun_retries_only_the_failed_questions(data, tmp_path, monkeypatch):
    from fanin.pipeline import StageFailed
    _flaky(monkeypatch, lambda q: "Saola" in q)
    with pytest.raises(StageFailed, match="1 of 4 questions failed.*rerun to retry"): run(_over(tmp_path, data))
    (f,) = (tmp_path / "outputs" / "t").iterdir()
    kept = {p.instance_id: p.cost["retrieve_ms"] for p in read_jsonl(f / "packs.jsonl.gz", Pack)}
    assert len(kept) == 3 and json.loads((f / "manifest.json").read_text())["finished"] is None
    monkeypatch.undo()
    run(_over(tmp_path, data))                                          # healthy again: exits normally
    again = {p.instance_id: p.cost["retrieve_ms"] for p in read_jsonl(f / "packs.jsonl.gz", Pack)}
    assert len(again) == 4 and all(again[i] == ms for i, ms in kept.items())   # the 3 finished packs were not redone
    m = pd.read_csv(f / "metrics.csv")
    assert (m.status == "ok").all()
    assert not (f / "failures.jsonl").exists() or not (f / "failures.jsonl").read_text().strip()


def test_a_stage_where_everything_failed_exits_non_zero_and_the_folder_stays_usable(data, tmp_path, monkeypatch):
    from fanin.pipeline import StageFailed
    _flaky(monkeypatch, lambda q: True)
    with pytest.raises(StageFailed, match="4 of 4 questions failed"): run(_over(tmp_path, data))
    (f,) = (tmp_path / "outputs" / "t").iterdir()
    summary = json.loads((f / "manifest.json").read_text())["summary"]
    assert summary["failed"] == 4 and summary["er"] is None            # no failure turned into a 0
    with pytest.raises(StageFailed): run(_over(tmp_path, data))          # still failing: still non-zero, no crash
    monkeypatch.undo()
    run(_over(tmp_path, data))
    assert (pd.read_csv(f / "metrics.csv").status == "ok").all()
