"""The semantic key-fact judge (`judge=semfact`): on the labelled set it was never adjusted on (frozen3) it passes the lab's bar
(accuracy >= 0.8, kappa >= 0.6), accepts paraphrases far more often than the rule judge `keyfact`, and accepts no empty, refusal
or copied-example answer; it declares the two sets it was adjusted on, so they never validate it; and it is built from its
config as the pipeline builds judges (a config file loaded on its own, no interpolation to resolve)."""
import json

from fanin.cli import main


def _check(judge, capsys, tmp_path):
    out = tmp_path / f"{judge}.jsonl"
    main(["judge-check", f"judge={judge}", "--cases", "data/judge_meta/frozen3_cases.jsonl", "--out", str(out)])
    last = dict(kv.split("=", 1) for kv in capsys.readouterr().out.strip().splitlines()[-1].split()[1:])
    return last, [json.loads(l) for l in out.read_text().splitlines()]


def _share(rows, kind):
    rows = [r for r in rows if r["kind"] == kind]
    return sum(r["verdict"] == r["label"] for r in rows) / len(rows)


def test_semfact_on_the_held_out_cases(capsys, tmp_path):
    last, rows = _check("semfact", capsys, tmp_path)
    assert last["judge"] == "semfact" and last["n"] == "108"
    assert float(last["accuracy"]) >= 0.8 and float(last["kappa"]) >= 0.6
    assert all(r["verdict"] == 0 for r in rows if r["kind"] in ("empty", "refusal", "copied_example"))
    _, rule_rows = _check("keyfact", capsys, tmp_path)
    assert _share(rows, "paraphrase") >= 0.8 and _share(rows, "paraphrase") > _share(rule_rows, "paraphrase")


def test_semfact_builds_from_its_config_file_alone_and_declares_its_development_sets():
    from fanin.components import make_judge
    from fanin.pipeline import group_node
    from fanin.semantic_judge import SemanticFactJudge
    j = make_judge(group_node("judge", "semfact", "answer.judges"))
    assert isinstance(j, SemanticFactJudge) and j.setting()["embedder"] == "all-MiniLM-L6-v2/onnx-fused-fp32"
    sets = j.case_sets()
    assert [n for n, p in sets.items() if j.held_out(p)] == ["frozen3"]
