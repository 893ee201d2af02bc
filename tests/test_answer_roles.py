"""The answer side as an instrument, on the tiny WildGraphBench fixture with loopback stand-in endpoints: reader and judge as
separate roles (a judge-only rerun with another judge model over existing answers), what the reader saw recorded per answer
and per table, and stages whose calls failed exit non-zero."""
import json

import pandas as pd
import pytest

from fanin.doors.cli import main
from fanin.core.schema import Answer, read_jsonl
from openai_standin import StandIn


def _judge_reply(body):
    return json.dumps({"correct": True, "reason": "stand-in", "statements": ["a statement"], "supported": [1], "covered": [1],
                       "score": 2, "claims": [], "justification": "stand-in"})


def _reader(s, ctx=4000):
    return ["reader_llm=vllm", f"reader_llm.base_url={s.base_url}", f"reader_llm.model={s.model}", f"reader_llm.context_tokens={ctx}"]


def _run(argv):
    try: main(argv)
    except SystemExit as e: return e.code
    return 0


def test_judge_only_rerun_with_another_judge_model_keeps_the_answers(tiny_overrides):
    ov = tiny_overrides + ["system=bm25", "answer.per_domain_type=1", "answer.check_judges=false"]
    assert _run(["run", "--stages", "index,retrieve,evaluate"] + ov) == 0
    with StandIn(model="reader-a", reply=lambda b: "Tower 1 was completed in 1911.") as ra, \
            StandIn(model="judge-b", reply=_judge_reply) as jb:
        assert _run(["run", "--stages", "answer,judge"] + ov + _reader(ra) + ["answer.judges=[keyfact]"]) == 0
        n_reader = len(ra.chats())
        (run,) = [p for p in (tiny_overrides_root(tiny_overrides) / "test").iterdir() if p.is_dir()]
        (adir,) = run.glob("answers-*")
        before = (adir / "answers.jsonl").read_text()
        # judge the same answers with an LLM judge on another model: no reader call, answers untouched
        assert _run(["run", "--stages", "judge"] + ov + _reader(ra) + ["answer.judges=[keyfact,wgb_llm]", "judge_llm=vllm",
                     f"judge_llm.base_url={jb.base_url}", "judge_llm.model=judge-b"]) == 0
        assert len(ra.chats()) == n_reader and len(jb.chats()) > 0
        assert (adir / "answers.jsonl").read_text() == before
        judged = sorted(p.name for p in adir.glob("judged-*"))
        assert any(n.startswith("judged-keyfact-rules-") for n in judged) and any(n.startswith("judged-wgb_llm-judge-b-") for n in judged)
        m = pd.read_csv(adir / "answer_metrics.csv")
        assert set(m.judge_model) == {"rules", "judge-b"} and (m.status == "ok").all()
        man = json.loads((next(adir.glob("judged-wgb_llm-*")) / "manifest.json").read_text())
        assert man["llm"]["model"] == "judge-b" and man["llm"]["endpoint"] == jb.base_url
        # the answer table's card names where the LLM judge departs from the benchmark's released evaluator
        from fanin.results.lab_report import answer_setting_line
        assert "departs from WildGraphBench tools/eval.py" in answer_setting_line([run])


def tiny_overrides_root(ov):
    from pathlib import Path
    return Path([o for o in ov if o.startswith("paths.outputs=")][0].split("=", 1)[1])


def test_reader_budget_truncation_is_recorded_on_answers_and_tables(tiny_overrides):
    ov = tiny_overrides + ["system=bm25", "answer.per_domain_type=2", "answer.judges=[keyfact]", "answer.check_judges=false"]
    with StandIn(model="reader-a", reply=lambda b: "An answer.") as ra:
        assert _run(["run", "--stages", "index,retrieve,evaluate,answer,judge"] + ov + _reader(ra) + ["reader.evidence_tokens=150"]) == 0
        assert "[1] (" in ra.chats()[-1]["messages"][1]["content"]
    (run,) = [p for p in (tiny_overrides_root(tiny_overrides) / "test").iterdir() if p.is_dir()]
    (adir,) = run.glob("answers-*")
    answers = read_jsonl(adir / "answers.jsonl", Answer)
    assert answers and all(a.meta["budget_tokens"] == 150 for a in answers)
    cut = [a for a in answers if a.meta["truncated"]]
    assert cut and all(a.meta["units_shown"] < a.meta["units_in_pack"] and a.meta["tokens_shown"] <= 150 for a in cut)
    t = pd.read_csv(adir / "tables" / "by_fan_in_bin.csv")
    assert "truncated_share" in t and t.truncated_share.max() > 0 and t.tokens_shown_share.max() < 1


@pytest.mark.parametrize("fault", ["null_content", "closed"])
def test_answer_stage_whose_calls_failed_exits_non_zero(tiny_overrides, fault, capsys):
    ov = tiny_overrides + ["system=bm25", "answer.per_domain_type=1", "answer.judges=[keyfact]", "answer.check_judges=false"]
    assert _run(["run", "--stages", "index,retrieve,evaluate"] + ov) == 0
    if fault == "closed":
        from fanin.models.local_models import free_port
        rc = _run(["run", "--stages", "answer,judge"] + ov + ["reader_llm=vllm", f"reader_llm.base_url=http://127.0.0.1:{free_port()}/v1",
                                                              "reader_llm.model=m", "reader_llm.context_tokens=4000"])
        assert rc == 1 and "does not answer" in capsys.readouterr().err
        return
    with StandIn(model="reader-a", fault=fault) as ra:
        rc = _run(["run", "--stages", "answer,judge"] + ov + _reader(ra))
    err = capsys.readouterr().err
    assert rc == 1 and "failed" in err and "content is null" in err
    (run,) = [p for p in (tiny_overrides_root(tiny_overrides) / "test").iterdir() if p.is_dir()]
    (adir,) = run.glob("answers-*")
    answers = read_jsonl(adir / "answers.jsonl", Answer)
    assert answers and all(a.status == "failed" for a in answers)   # written, recorded, never scored
    m = pd.read_csv(adir / "answer_metrics.csv")
    assert (m.status == "failed").all() and m.verdict.isna().all()
    assert json.loads((run / "manifest.json").read_text())["finished"] is None
