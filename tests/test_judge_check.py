"""`fanin judge-check` on the shipped meta-evaluation cases: the deterministic judges reach the bar with no false positive on
empty, repeated-question and refusal answers, and the interface other checks rely on holds (last line, --out rows)."""
import json

from fanin.doors.cli import main


def test_judge_check_proxies_on_the_shipped_cases(capsys, tmp_path):
    for judge in ("keyfact", "proxy"):
        out = tmp_path / f"{judge}.jsonl"
        main(["judge-check", f"judge={judge}", "--cases", "data/judge_meta/cases.jsonl", "--out", str(out)])
        lines = capsys.readouterr().out.strip().splitlines()
        last = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
        assert lines[-1].startswith("judge-check ") and last["judge"] == judge and last["model"] == "rules" and last["n"] == "108"
        assert float(last["accuracy"]) >= 0.8 and float(last["kappa"]) > 0.6
        assert "empty=0 repeat_question=0 refusal=0" in lines[-2]
        rows = [json.loads(l) for l in out.read_text().splitlines()]
        assert len(rows) == 108 and {"id", "label", "verdict"} <= set(rows[0])
        assert all(r["verdict"] == 0 for r in rows if r["kind"] in ("empty", "repeat_question", "refusal"))


def test_a_judge_is_checked_on_cases_of_the_types_it_grades(tmp_path):
    """GraphRAG-Bench's judge grades FB / OE answers with its LLM: it declares its own labelled set (32 cases in those types), so
    its agreement is measured on answers it can judge, not reported as 0 on WildGraphBench's types; a card says when cases
    went unjudged."""
    from fanin.judging.agreement import agreement_label, load_cases
    from fanin.judging.judges import Judge
    from fanin.judging.llm_judges import GraphRAGBenchJudge
    from fanin.core.config import resolve_path
    assert Judge.cases is None and GraphRAGBenchJudge.cases.endswith("graphrag_bench_cases.jsonl")
    rows = load_cases(resolve_path(GraphRAGBenchJudge.cases))
    assert len(rows) == 32 and {r["qtype"] for r in rows} == {"FB", "OE"} and sum(r["label"] for r in rows) == 12
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "qtype": "essay"}) + "\n")
    import pytest
    with pytest.raises(ValueError, match=r"bad.jsonl:1: qtype='essay'; use one of single-fact"):
        load_cases(bad)
    card = agreement_label({"accuracy": 0.5, "kappa": None, "n": 32, "failed": 3, "validated": False, "min_accuracy": 0.8})
    assert "3 of them not judged" in card and "BELOW 0.80" in card
