"""A spending cap against a loopback stand-in endpoint: a run stops before the call that could pass `budget.usd`, in one line
saying what was spent and what is left, keeps its paid replies, and a rerun with a higher cap resumes paying only for the rest;
the ledger records dollars at the configured price."""
import json

from fanin.doors.cli import main
from openai_standin import StandIn


def _run(argv):
    try: main(argv)
    except SystemExit as e: return e.code
    return 0


def _reader(s):   # every reply costs 7 completion tokens at $1,000 a million: $0.007; a call may cost up to 256 tokens: $0.256
    return ["reader_llm=vllm", f"reader_llm.base_url={s.base_url}", f"reader_llm.model={s.model}", "reader_llm.context_tokens=4000",
            "reader_llm.concurrency=1", "reader_llm.price_in=0", "reader_llm.price_out=1000", "reader.max_tokens=256"]


def test_a_budget_stops_before_it_is_passed_and_a_higher_one_resumes(tiny_overrides, capsys):
    ov = tiny_overrides + ["system=bm25", "answer.judges=[proxy]", "answer.check_judges=false"]
    assert _run(["run", "--stages", "index,retrieve,evaluate"] + ov) == 0
    with StandIn(model="priced-7b", reply=lambda b: "An answer.") as s:
        # 0.275: the preflight's probe costs $0.007; two answers fit (0.007 + 0.256, 0.014 + 0.256), a third could pass it (0.021 + 0.256)
        code = _run(["run", "--stages", "answer,judge"] + ov + _reader(s) + ["budget.usd=0.275"])
        err = capsys.readouterr().err
        assert code != 0 and len(answers(s)) == 2
        assert "budget.usd=0.275: $0.0210 spent, $0.2540 left; the next call to 'priced-7b' could cost $0.2560" in err
        assert "rerun with a higher budget.usd to resume" in err and "Traceback" not in err
        assert _run(["run", "--stages", "answer,judge"] + ov + _reader(s) + ["budget.usd=1"]) == 0
        assert len(answers(s)) == 4   # the two paid replies came back from the cache; only the other two questions were asked
    (run,) = [p for p in (tiny_overrides_root(tiny_overrides) / "test").iterdir() if p.is_dir()]
    led = json.loads((run / "ledger.json").read_text())
    assert led["usd"] == 0.021 and led["cache_hits"] == 2   # this run's probe and two answers paid now, two replayed at no cost


def test_a_budget_with_an_unpriced_model_stops_before_any_call(tiny_overrides, capsys):
    ov = tiny_overrides + ["system=bm25", "answer.judges=[proxy]", "answer.check_judges=false"]
    assert _run(["run", "--stages", "index,retrieve,evaluate"] + ov) == 0
    with StandIn(model="unpriced-7b", reply=lambda b: "An answer.") as s:
        code = _run(["run", "--stages", "answer"] + ov + [a for a in _reader(s) if ".price_" not in a] + ["budget.usd=5"])
        assert code != 0 and len(answers(s)) == 0
        assert "the price of 'unpriced-7b' is unknown" in capsys.readouterr().err


def answers(s):
    "The stand-in's chat requests other than the preflight's probe."
    return [c for c in s.chats() if "Reply with the JSON object" not in json.dumps(c["messages"])]


def tiny_overrides_root(ov):
    from pathlib import Path
    return Path([o for o in ov if o.startswith("paths.outputs=")][0].split("=", 1)[1])


def test_plan_prints_the_dollars_of_the_calls_it_would_make(tiny_overrides):
    from fanin.run.plan import plan
    ov = tiny_overrides + ["system=bm25", "answer.judges=[proxy]"]
    assert _run(["run", "--stages", "index,retrieve,evaluate"] + ov) == 0
    p = plan(ov + ["reader_llm=openai", "reader_llm.model=gpt-4o-mini", "reader_llm.context_tokens=4000"], ["answer"])
    llm = p.rows[p.rows.kind == "llm"]
    want = round(float((llm.prompt_tokens * 0.15 + llm.completion_tokens * 0.60).sum()) / 1e6, 4)
    assert len(llm) and p.usd() == want > 0 and f"dollars: about ${want:,.4f}" in p.render() and p.to_dict()["usd"] == want
    p = plan(ov + ["reader_llm=vllm", "reader_llm.base_url=http://127.0.0.1:9/v1", "reader_llm.model=my-7b", "reader_llm.context_tokens=4000"], ["answer"])
    assert p.usd() is None and "dollars: unknown, no price for my-7b" in p.render()
