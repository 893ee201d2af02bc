"""GraphRAG-Bench's released layout (fanin.data.graphrag_bench) on the hand-made fixture: bad input stops before any work with file,
line, field and value; and the lab runs end to end on it — retrieval over the textbooks, a reader with a rationale (stand-in),
and the GraphRAG-Bench judge scoring MC/TF/MS by rule and FB/OE and the rationale through the judge LLM (stand-in)."""
import json
import shutil

import pandas as pd
import pytest

from fanin.doors.cli import main
from fanin.core.config import ConfigError
from fanin.data.graphrag_bench import GraphRAGBench
from fanin.core.schema import DataError

from conftest import ROOT
from openai_standin import StandIn

FX = ROOT / "tests" / "fixtures" / "graphrag_bench_tiny"


def _copy(tmp_path):
    d = tmp_path / "gb"
    shutil.copytree(FX, d)
    return d


def test_bad_input_names_file_line_field_and_value(tmp_path):
    d = _copy(tmp_path)
    tf = d / "questions" / "TF.jsonl"
    rows = [json.loads(l) for l in tf.read_text().splitlines()]
    rows[1]["Levl-1 Topic"] = rows[1].pop("Level-1 Topic")       # a misspelt field on line 2
    rows[0]["Choices"] = {"A": "True", "B": "False"}               # options on a TF question, line 1
    tf.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "questions" / "OE.jsonl").unlink()
    with pytest.raises(DataError) as e:
        GraphRAGBench(d)
    got = {(p.path.split("/")[-1], p.line, p.field) for p in e.value.problems}
    assert {("TF.jsonl", 1, "Choices"), ("TF.jsonl", 2, "Levl-1 Topic"), ("TF.jsonl", 2, "Level-1 Topic"), ("OE.jsonl", None, "<file>")} <= got
    assert GraphRAGBench(d, types=["FB", "MC", "MS"]).instances()   # the broken files left out, the rest loads
    with pytest.raises(ConfigError, match="released layout"):
        GraphRAGBench(tmp_path)


def _reader_reply(body):
    q = body["messages"][-1]["content"]
    q = q[q.rfind("Question"):] if "Question" in q else q[-400:]   # the question, not the evidence above it
    ans = "B" if "artesian" in q else "ABD" if "precipitation" in q else "False" if "water table" in q else "3"
    return f"Answer: {ans}\nRationale: The textbook says so."


def test_the_lab_runs_on_it_end_to_end(tmp_path):
    with StandIn(model="reader", reply=_reader_reply) as r, StandIn(model="judge", reply=lambda b: json.dumps({"grade": 1, "reason": "ok"})) as j:
        # the registered experiment (configs/experiment/graphrag_bench_fixture.yaml: the fixture, the graphrag_bench judge), one system
        ov = ["experiment=graphrag_bench_fixture", f"paths.outputs={tmp_path}", "progress=false", "experiment_name=gb",
              "systems=[bm25]", "answer.check_judges=false",
              "reader_llm=vllm", f"reader_llm.base_url={r.base_url}", f"reader_llm.model={r.model}", "reader_llm.context_tokens=4000",
              "judge_llm=vllm", f"judge_llm.base_url={j.base_url}", f"judge_llm.model={j.model}"]
        try: main(["run", "--stages", "index,retrieve,evaluate,answer,judge"] + ov)
        except SystemExit as e: assert e.code == 0, e
    (packs,) = tmp_path.rglob("packs.jsonl.gz")
    (metrics,) = tmp_path.rglob("metrics.csv")
    m = pd.read_csv(metrics)
    assert len(m) == 8 and set(m.qtype) == {"FB", "MC", "MS", "TF", "OE"} and (m.fan_in == 0).all()   # no document-level gold
    (judged,) = [p for p in tmp_path.rglob("judgments.jsonl")]
    rows = [json.loads(l) for l in judged.read_text().splitlines() if l.strip()]
    acc = {r["instance_id"]: r["scores"]["accuracy"] for r in rows if r["status"] == "ok"}
    assert len(acc) == 8
    assert acc["gb-MC-0001"] == 100 and acc["gb-MC-0002"] == 0          # B is right for the aquifer, wrong for Ohm's law
    assert acc["gb-MS-0001"] == 100 and acc["gb-TF-0001"] == 100 and acc["gb-TF-0002"] == 0
    assert all(r["scores"]["r"] == 100 and "ar" in r["scores"] for r in rows)   # the rationale graded by the judge LLM
    from fanin.results.experiments import run_table
    from fanin.results.lab_report import read_table
    t = read_table(run_table("graphrag_bench_scores", ov)[""]).set_index("qtype")   # the registered table (driver + config only)
    assert set(t.index) == {"FB", "MC", "MS", "TF", "OE"} and t.loc["MC", "accuracy"] == 50 and t.loc["TF", "accuracy"] == 50
    assert (t.r == 100).all() and (t.system == "bm25").all()


def test_fanin_data_graphrag_bench_fetches_then_checks_or_says_why(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    def offline(**kw): raise OSError("Name or service not known")

    def released(repo_id, repo_type, local_dir, **kw):   # the hub's folder, as a download would leave it
        assert (repo_id, repo_type) == ("Awesome-GraphRAG/GraphRAG-Bench", "dataset")
        shutil.copytree(FX, local_dir, dirs_exist_ok=True)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(SystemExit) as e:
        main(["data", "graphrag_bench", "--dest", str(tmp_path / "a")])
    assert e.value.code == 2 and "cannot fetch GraphRAG-Bench" in capsys.readouterr().err
    monkeypatch.setattr(huggingface_hub, "snapshot_download", released)
    main(["data", "graphrag_bench", "--dest", str(tmp_path / "b")])
    assert "dataset=graphrag_bench dataset.root=" in capsys.readouterr().out
    assert len(GraphRAGBench(tmp_path / "b").instances()) == 8
