"""WildGraphBench's released evaluator's rules (`fanin.judging.wgb_eval`, `fanin eval-wgb`): the pure rules, a predictions file scored
end to end through the lab's endpoint layer with a loopback stand-in judge (eval.py's reading of a failed call and the lab's
two, its duplicate and unknown-question handling, its reply limits), the lab's departures, and the errors a bad predictions
file gets."""
import json
import math
from pathlib import Path

import pytest

from fanin.doors.cli import main
from fanin.judging.judges import statement_prf
from fanin.judging.wgb_eval import (MAX_STATEMENTS, WGBReleasedJudge, as_released, clean_statements, overall_accuracy, summary_pass,
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
    statements, and support checks of exactly the length the schema asks for (the first statement supported: a graded score
    of 0.5 under eval.py's rules, a true verdict under the lab's)."""
    text = json.dumps(body["messages"])
    props = (((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}).get("properties", {})
    if "correct" in props:
        if "Saola" in text: return "I think it is fine."
        return json.dumps({"reason": "names the signal", "correct": "Signal No. 10" in text})
    if "statements" in props:
        return json.dumps({"statements": ["Vicente injured over 130 people.", "Vicente injured over 130 people.", "It rained."]})
    if "checks" in props:
        n, graded = props["checks"]["maxItems"], "score" in props["checks"]["items"]["properties"]
        return json.dumps({"checks": [{"reason": "stated" if i == 0 else "absent", **({"score": 0.5 if i == 0 else 0.2} if graded
                                       else {"supported": i == 0})} for i in range(n)]})
    return json.dumps({"ok": True})   # the endpoint layer's preflight probe


def _run(argv):
    try: main(argv)
    except SystemExit as e: return e.code
    return 0


def _overrides(tmp_path, s):
    return [f"dataset.root={FIXTURE}", "dataset.domains=[nature]", f"paths.outputs={tmp_path / 'outputs'}", "progress=false",
            "answer.check_judges=false", "judge_llm=vllm", f"judge_llm.base_url={s.base_url}", f"judge_llm.model={s.model}"]


def _rows():
    return [{"question": QA[0]["question"], "prediction": "Hurricane Signal No. 5.", "model": "reader-x"},   # replaced below
            {"question": QA[1]["question"], "prediction": "Lots of rain.", "model": "reader-x"},
            {"question": QA[2]["question"], "prediction": "Vicente injured over 130 people. It rained.", "model": "reader-x"},
            {"question": "Which storm hit Lisbon?", "prediction": "None.", "model": "reader-x"},            # no such question
            {"question": QA[0]["question"], "prediction": "Hurricane Signal No. 10.", "model": "reader-x"}]


def test_eval_wgb_follows_eval_py_by_default(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred), "--out", str(tmp_path / "ev")] + _overrides(tmp_path, s)) == 0
        sent = s.chats()
    out = capsys.readouterr().out.strip().splitlines()
    last = dict(kv.split("=", 1) for kv in out[-1].split()[1:])
    assert out[-1].startswith("eval-wgb ") and last["rules"] == "wgb-eval@2" and last["judge_model"] == "judge-w"
    # the repeated question's last prediction is scored; the unknown one left out; the fourth gold question, unpredicted, is an
    # empty answer (0 without a call)
    summ = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert (summ["replaced_duplicates"], summ["unmatched"], summ["unpredicted"]) == (1, 1, 1) and summ["departures"] == []
    assert (last["n"], last["judged"], last["failed"]) == ("4", "3", "1")
    # single-fact right, multi-fact call failed: eval.py scores it 0 (its side), the lab's readings drop it or score it 0
    assert float(last["avg_acc"]) == pytest.approx(100 / 3, abs=1e-4) and float(last["avg_acc_failures_excluded"]) == 50
    assert float(last["avg_acc_failures_as_zero"]) == pytest.approx(100 / 3, abs=1e-4)
    assert "reader model=reader-x" in summ["card"] and "departures: none" in summ["card"]
    x, rel = summ["failures_excluded"], summ["as_released"]
    # the summary: 2 statements after de-duplication, gold 2; the first of each side scored 0.5 (supported), the other 0.2
    assert x["summary"]["precision"] == 50 and x["summary"]["recall"] == 50 and x["summary"]["pass_rate"] == 0
    assert rel["summary"]["precision"] == 0 and rel["summary"]["f1"] == 0 and rel["summary"]["recall"] == 50
    per_q = [json.loads(l) for l in (tmp_path / "ev" / "rows.jsonl").read_text().splitlines()]
    # rows in the file's order of the predictions kept (the repeated question at its last line), the unpredicted one last
    assert [r["status"] for r in per_q] == ["ok"] * 4 and [r["failed_calls"] for r in per_q] == [1, 0, 0, 0]
    assert "unparseable" in per_q[0]["detail"]["failures"][0] and per_q[2]["prediction"] == "Hurricane Signal No. 10."
    assert per_q[1]["detail"]["answer_statements"] == ["Vicente injured over 130 people.", "It rained."]
    assert per_q[3]["prediction"] == "" and per_q[3]["line"] is None
    # eval.py's reply limits (2,048 / 10,000), asked of a model whose window the stand-in does not report
    limits = sorted({b.get("max_tokens") or b.get("max_completion_tokens") for b in sent if b.get("messages")})
    assert 2048 in limits and 10000 in limits, limits


def test_eval_wgb_lab_departures(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(r) + "\n" for r in _rows()[1:3]))
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred), "--out", str(tmp_path / "ev"), "judge=wgb_eval_lab"] + _overrides(tmp_path, s)) == 0
    summ = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summ["departures"] == ["every_fact", "lab_support_check", "lab_token_limits", "whole_row_failure",
                                  "strict_predictions", "unpredicted_not_scored"]
    assert all(d in summ["card"] for d in summ["departures"]) and summ["unpredicted_scored_as_empty"] is False
    assert (summ["questions"], summ["judged"], summ["failed"]) == (2, 1, 1)      # the failed call fails its whole question
    assert summ["failures_excluded"]["summary"]["precision"] == 50                  # true / false checks, the first supported
    rows = [json.loads(l) for l in (tmp_path / "ev" / "rows.jsonl").read_text().splitlines()]
    assert rows[0]["status"] == "failed" and "unparseable" in rows[0]["error"]
    # strict_predictions: the repeated question stops the run with file, line and the fix
    pred.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    assert _run(["eval-wgb", str(pred), "judge=wgb_eval_lab"] + _overrides(tmp_path, s)) == 2
    assert "pred.jsonl:5: field 'question'" in capsys.readouterr().err


def test_eval_wgb_empty_prediction_scores_zero_without_a_call(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"question": QA[0]["question"], "prediction": "   "}) + "\n")
    with StandIn(model="judge-w", reply=_judge_reply) as s:
        assert _run(["eval-wgb", str(pred), "--out", str(tmp_path / "ev")] + _overrides(tmp_path, s)) == 0
        assert not s.chats()
    last = dict(kv.split("=", 1) for kv in capsys.readouterr().out.strip().splitlines()[-1].split()[1:])
    assert last["failed"] == "0" and float(last["avg_acc"]) == 0 and float(last["avg_acc_failures_excluded"]) == 0


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
        assert _run(["eval-wgb", str(pred), "judge.departures=[strict_predictions]"] + _overrides(tmp_path, s)) == 2
        assert not s.chats()
    assert re.search(message, capsys.readouterr().err)


def test_eval_wgb_names_its_rules_and_refuses_another_judge(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"question": QA[0]["question"], "prediction": "x"}) + "\n")
    assert _run(["eval-wgb", str(pred), "judge=wgb_llm", f"dataset.root={FIXTURE}"]) == 2
    assert "judge=wgb_eval" in capsys.readouterr().err
    st = WGBReleasedJudge().setting()
    assert st["rules"] == "wgb-eval@2" and st["max_statements"] == 20 and st["threshold"] == 0.5 and st["departures"] == []
    assert [p.split("@")[0] for p in st["prompts"]] == ["judge_wgb_fact", "judge_wgb_statements", "judge_wgb_check"]
    assert st["limits"] == {"fact": 2048, "statements": 10000, "support": 10000, "per_check": 0}
    with pytest.raises(ValueError, match="departures \\['lenient'\\] are not among"):
        WGBReleasedJudge(departures=["lenient"])
