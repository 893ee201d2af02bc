"""The fusion study on the fixture corpus: its fast ER is the tables' ER (checked on every question against the packs
`HybridSystem.retrieve` builds), the split keeps tuning and report questions apart, and every held-out cell carries its
bootstrap interval."""
import pytest

from fanin.results.fusion import FUSION_GRID, fusion_candidates, fusion_study, split_rows

from conftest import FIXTURE


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_fusion_study_on_the_fixture(tmp_path):
    from fanin.core.config import resolve_path
    ov = [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path}", "progress=false", "experiment_name=test",
          f"embedder.model_dir={resolve_path('outputs/models')}", "embedder.threads=1"]
    rows = fusion_candidates(ov, depth=30, log=lambda *_: None)   # check=True: fast ER == evidence_metrics on every question
    assert rows and all(r["bm25"] or r["dense"] for r in rows)
    for convex in (["system.fusion=convex", "system.alpha=0.3"],):   # the check holds for the other fusion too
        assert fusion_candidates(ov + convex, depth=30, log=lambda *_: None)
    rows = [{**r, "instance_id": f"{r['instance_id']}-{i}"} for i in range(4) for r in rows]   # the fixture's 3 questions, 4 times: cells to split
    tune = split_rows(rows, "questions")
    assert 0 < tune.sum() < len(rows)
    doc = fusion_study(ov, splits=("questions",), rows=rows, record=tmp_path / "measured", log=lambda *_: None)
    rep = doc["splits"]["questions"]["report"]
    assert rep and all(r["ci_low"] <= r["margin"] <= r["ci_high"] for r in rep)
    assert (tmp_path / "tables" / "fusion_report_questions.csv").exists() and (tmp_path / "measured" / "fusion.json").exists()
    assert doc["splits"]["questions"]["chosen"]["fusion"] in ("rrf", "convex") and len(FUSION_GRID) > 100
