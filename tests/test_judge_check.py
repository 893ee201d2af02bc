"""`fanin judge-check` on the shipped meta-evaluation cases: the deterministic judges reach the bar with no false positive on
empty, repeated-question and refusal answers, and the interface other checks rely on holds (last line, --out rows)."""
import json

from fanin.cli import main


def test_judge_check_proxies_on_the_shipped_cases(capsys, tmp_path):
    for judge in ("keyfact", "proxy"):
        out = tmp_path / f"{judge}.jsonl"
        main(["judge-check", f"judge={judge}", "--cases", "data/judge_meta/cases.jsonl", "--out", str(out)])
        lines = capsys.readouterr().out.strip().splitlines()
        last = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
        assert lines[-1].startswith("judge-check ") and last["judge"] == judge and last["model"] == "rules" and last["n"] == "96"
        assert float(last["accuracy"]) >= 0.8 and float(last["kappa"]) > 0.6
        assert "empty=0 repeat_question=0 refusal=0" in lines[-2]
        rows = [json.loads(l) for l in out.read_text().splitlines()]
        assert len(rows) == 96 and {"id", "label", "verdict"} <= set(rows[0])
        assert all(r["verdict"] == 0 for r in rows if r["kind"] in ("empty", "repeat_question", "refusal"))
