"""WildGraphBench's released evaluator's rules (`fanin.wgb_eval`, `fanin eval-wgb`): the pure rules, a predictions file scored
end to end through the lab's endpoint layer with a loopback stand-in judge (both readings of a failed call, eval.py's own
reading), and the errors a bad predictions file gets."""
import json
import math
from pathlib import Path

import pytest

from fanin.cli import main
from fanin.judges import statement_prf
from fanin.wgb_eval import (MAX_STATEMENTS, WGBReleasedJudge, as_released, clean_statements, overall_accuracy, summary_pass,
                            summary_prf)
from openai_standin import StandIn

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "wildgraphbench_tiny"
QA = [json.loads(l) for l in (FIXTURE / "QA" / "nature" / "questions.jsonl").read_text().splitlines()]


def test_rules():
    assert clean_statements(["a", " a ", "", "b"] + [f"s{i}" for i in range(40)])[:3] == ["a", "b", "s0"]
    assert len(clean_statements([f"s{i}" for i in range(40)])) == MAX_STATEMENTS == 20
    assert summary_prf(4, 0, 0, 0) == {"precision": 0, "recall": 0, "f1": 0}     # no statements: all 0, not P n/a
    assert summary_prf(4, 3, 5, 4) == statement_prf(5, 4, 4, 3)                   # otherwise the lab's one P / R / F1
    assert summary_pass(summary_prf(2, 2, 3, 3)) and not summary_pass(summary_prf(2, 1, 3, 3))
    assert as_released(summary_prf(2, 2, 3, 3), has_paragraph=False)["precision"] == 0
    assert overall_accuracy([100, 0], [100, 0]) == 50 and math.isnan(overall_accuracy([], []))


def _judge_reply(body):
    """A loopback judge: fact verdicts by question (the multi-fact one is a reply that is not JSON: a failed call), summary
    statements, and support checks of exactly the length the schema asks for (the first statement supported)."""
    text = json.dumps(body["messages"])
    props = (((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}).get("properties", {})
    if "correct" in props:
        if "Saola" in text: return "I think it is fine."
        return json.dumps({"reason": "names the signal", "correct": "Signal No. 10" in text})
    if "statements" in props:
        return json.dumps({"statements": ["Vicente injured over 130 people.", "Vicente injured over 130 people.", "It rained."]})
    if "checks" in props:
        n = props["checks"]["maxItems"]
        return json.dumps({"checks": [{"reason": "stated" if i == 0 else "absent", "supported": i == 0} for i in range(n)]})
    return json.dumps({"ok": True})   # the endpoint layer's preflight probe


def _run(argv):
    try: main(argv)
    except SystemExit as e: return e.code
    return 0


def _overrides(tmp_path, s):
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}", "progress=false",
            "answer.check_judges=false", "judge_llm=vllm", f"judge_llm.base_url={s.base_url}", f"judge_llm.model={s.model}"]


def test_eval_wgb_scores_a_predictions_file_with_both_readings(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    rows = [{"question": QA[0]["question"], "prediction": "Hurricane Signal No. 10.", "model": "reader-x"},
            {"question": QA[1]["question"], "prediction": "Lots of rain.", "model": "reader-x"},
            {"question": QA[2]["question"], "prediction": "Vicente injured over 130 people. It rained.", "model": "reader-x"}]
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred), "--out", str(tmp_path / "ev")] + _overrides(tmp_path, s)) == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = dict(kv.split("=", 1) for kv in out[-1].split()[1:])
    assert out[-1].startswith("eval-wgb ") and last["rules"] == "wgb-eval@1" and last["judge_model"] == "judge-w"
    assert (last["n"], last["judged"], last["failed"]) == ("3", "2", "1")
    # the single-fact question right, the multi-fact call failed: 100 with failures excluded, 50 with failures as 0
    assert float(last["avg_acc"]) == 100 and float(last["avg_acc_failures_as_zero"]) == 50
    summ = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summ["unpredicted"] == 1 and "reader model=reader-x" in summ["card"] and "wgb-eval@1" in summ["card"]
    x, z, rel = summ["failures_excluded"], summ["failures_as_zero"], summ["as_released"]
    # the summary: 2 statements after de-duplication, gold 2; one of each side supported -> P = R = 50, no pass
    assert x["summary"]["precision"] == 50 and x["summary"]["recall"] == 50 and x["summary"]["pass_rate"] == 0
    assert rel["summary"]["precision"] == 0 and rel["summary"]["f1"] == 0            # the released records have no answer
    assert x["overall_accuracy"] == 50 and z["overall_accuracy"] == pytest.approx(100 / 3)
    per_q = [json.loads(l) for l in (tmp_path / "ev" / "rows.jsonl").read_text().splitlines()]
    assert [r["status"] for r in per_q] == ["ok", "failed", "ok"] and "unparseable" in per_q[1]["error"]
    assert per_q[2]["detail"]["answer_statements"] == ["Vicente injured over 130 people.", "It rained."]
    assert per_q[2]["detail"]["precision_reference"] == "gold_statements"


def test_eval_wgb_empty_prediction_scores_zero_without_a_call(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"question": QA[0]["question"], "prediction": "   "}) + "\n")
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred), "--out", str(tmp_path / "ev")] + _overrides(tmp_path, s)) == 0
        assert not s.chats()
    last = dict(kv.split("=", 1) for kv in capsys.readouterr().out.strip().splitlines()[-1].split()[1:])
    assert last["failed"] == "0" and float(last["avg_acc"]) == 0


@pytest.mark.parametrize("row,message", [
    ({"question": QA[0]["question"][:-1], "prediction": "x"}, r"pred.jsonl:1: field 'question' = .*matches no question.*closest"),
    ({"question": QA[0]["question"], "pred_answer": "x"}, r"pred.jsonl:1: field 'prediction' missing; rename field 'pred_answer'"),
    ({"question": QA[0]["question"], "prediction": 3}, r"pred.jsonl:1: field 'prediction' = 3; write a string"),
])
def test_eval_wgb_bad_predictions_stop_with_file_line_field_and_fix(tmp_path, capsys, row, message):
    import re
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps(row) + "\n")
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred)] + _overrides(tmp_path, s)) == 2
        assert not s.chats()
    assert re.search(message, capsys.readouterr().err)


def test_eval_wgb_names_its_rules_and_refuses_another_judge(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"question": QA[0]["question"], "prediction": "x"}) + "\n")
    assert _run(["eval-wgb", str(pred), "judge=wgb_llm", f"dataset.root={FIXTURE}"]) == 2
    assert "judge=wgb_eval" in capsys.readouterr().err
    st = WGBReleasedJudge().setting()
    assert st["rules"] == "wgb-eval@1" and st["max_statements"] == 20 and st["prompts"][0].startswith("judge_fact@v")
