"""A judge is validated on accuracy AND kappa, on its held-out sets where they exist; `fanin judge-check` reports the tuning set and
every held-out set; every judge prompt is neutral (fields described in words, no example value to copy, the reason first)."""
import json
from pathlib import Path

import pytest
import yaml

from fanin.doors.cli import main
from fanin.judging.agreement import agreement_label, judge_agreement, judge_check, load_cases, meets_bar
from fanin.judging.judges import DEFAULT_CASES, Judge
from fanin.judging.llm_judges import GraphRAGBenchJudge, WildGraphBenchJudge
from fanin.judging.proxy_judges import KeyFactJudge

ROOT = Path(__file__).resolve().parents[1]


class SaysWrong(Judge):
    name = "says_wrong"
    def verdict(self, inst, j): return 0.0
    def score(self, inst, answer, llm=None): return {}, {}


def test_accuracy_alone_does_not_validate(tmp_path):
    rows = load_cases(ROOT / DEFAULT_CASES)
    skewed = [r for r in rows if r["label"] == 0][:18] + [r for r in rows if r["label"] == 1][:2]   # 90% wrong answers
    f = tmp_path / "skewed.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in skewed))
    a = judge_agreement(SaysWrong(), cases=f)
    assert a["accuracy"] == 0.9 and a["kappa"] == 0 and not a["validated"] and a["min_kappa"] == 0.6
    assert "BELOW 0.80 accuracy or 0.60 kappa" in agreement_label(a)
    assert meets_bar(0.85, 0.7) and not meets_bar(0.9, 0.0) and not meets_bar(0.9, None) and not meets_bar(0.9, float("nan"))
    # a card recorded with accuracy as the only bar still reads as it was recorded
    assert agreement_label({"accuracy": 0.7, "kappa": 0.3, "n": 96, "failed": 0, "validated": False, "min_accuracy": 0.8}) \
        .endswith("BELOW 0.80: not a validated judge")


def test_validated_follows_the_held_out_sets_and_missing_files_are_skipped(tmp_path):
    frozen = sorted(p.name for p in (ROOT / "data" / "judge_meta").glob("frozen*_cases.jsonl"))
    assert "frozen_cases.jsonl" in frozen
    a = judge_agreement(KeyFactJudge())
    held = [n for n in a["sets"] if n != "tuning"]
    assert len(held) == len(frozen) and all(a["sets"][n]["held_out"] for n in held) and not a["sets"]["tuning"]["held_out"]
    sizes = {n: len(load_cases(ROOT / "data" / "judge_meta" / f"{n}_cases.jsonl")) for n in held}
    assert a["validated_on"] == "+".join(held) and a["n"] == sum(sizes.values())   # the held-out sets pooled
    assert a["validated"] == meets_bar(a["accuracy"], a["kappa"])
    label = agreement_label(a)
    assert label.startswith(f"held out ({a['validated_on']}): acc") and "; tuning: acc" in label

    class Adjusted(KeyFactJudge):   # adjusted on every held-out set: its figures there are development figures
        development_sets = tuple(frozen)
    b = judge_agreement(Adjusted())
    assert b["validated_on"] == "tuning" and not any(x["held_out"] for x in b["sets"].values())
    assert agreement_label(b).startswith("tuning (no held-out set): acc") and "frozen (development): acc" in agreement_label(b)

    class OwnSets(KeyFactJudge):    # a judge with its own labelled set names its further sets; one not written yet is skipped
        cases = str(ROOT / DEFAULT_CASES)
        frozen_cases = (str(ROOT / "data" / "judge_meta" / "frozen3_cases.jsonl"), str(tmp_path / "not_written_yet_cases.jsonl"))
    assert set(OwnSets().case_sets()) == {"tuning", "frozen3"}
    g = GraphRAGBenchJudge()   # its own set and no further one
    assert set(g.case_sets()) == {"tuning"} and set(g.case_sets(cases=str(tmp_path / "x.jsonl"))) == {"cases"}


def test_judge_check_reports_every_set(capsys, tmp_path):
    out = tmp_path / "rows.jsonl"
    main(["judge-check", "judge=keyfact", "--out", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    machine = [dict(kv.split("=", 1) for kv in l.split()[1:]) for l in lines if l.startswith("judge-check ")]
    names = [m["set"] for m in machine]
    assert names[0] == "tuning" and "frozen" in names and names[-1] == "held_out" and lines[-1].startswith("judge-check ")
    assert machine[0]["held_out"] == "False" and all(m["held_out"] == "True" for m in machine[1:-1])
    sizes = {m["set"]: int(m["n"]) for m in machine[:-1]}
    assert int(machine[-1]["n"]) == sum(n for s, n in sizes.items() if s != "tuning")
    assert lines[len(lines) - len(machine) - 1].startswith("validated: ") and "pooled" in lines[len(lines) - len(machine) - 1]
    assert any(l.startswith("tuning set: data/judge_meta/cases.jsonl (n=108, tuning)") for l in lines)
    assert any(l.startswith("frozen set: data/judge_meta/frozen_cases.jsonl (n=108, held out)") for l in lines)
    assert sum(l.startswith("agreement by kind: ") for l in lines) == len(machine) - 1
    assert sum(l.startswith("agreement by kind: ") and "copied_example=" in l for l in lines) == sum(n == 108 for n in sizes.values())
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert {r["set"] for r in rows} == set(names[:-1]) and len(rows) == sum(sizes.values())
    assert all(r["id"].startswith("fz-") for r in rows if r["set"] == "frozen")


def test_wgb_llm_names_its_departures_from_the_released_evaluator():
    st = WildGraphBenchJudge().setting()
    for what in ("question", "20", "whole answer", "paragraph", "P = R = F1 = 0", "R >= 50", "P = R = 1", "failed call"):
        assert what in st["departs_from"] or what in WildGraphBenchJudge.__doc__, what


VERDICTS = {"correct", "supports", "covered", "grade", "score", "supported", "checks", "statements"}


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "prompts").glob("judge_*.yaml")), ids=lambda p: p.stem)
def test_judge_prompts_are_neutral(path):
    p = yaml.safe_load(path.read_text())
    text = p["system"] + p["user"]
    assert '{"' not in text and "one short sentence" not in text.lower(), f"{path.name} shows an example reply"
    assert '"..."' not in text and "true or false" not in text, f"{path.name} shows an example value"
    props, required = list(p["schema"]["properties"]), p["schema"]["required"]
    # every field required, in the properties' order: a grammar (llama.cpp writes required fields first) keeps the order
    assert required == props, f"{path.name}: required {required} != properties {props}"
    for why in ("reason", "justification"):
        if why in props:
            later = [f for f in props[props.index(why) + 1:] if f in VERDICTS]
            assert later, f"{path.name}: the {why} must come before the verdict"


@pytest.mark.parametrize("name", ["proxy", "keyfact", "semfact"])
def test_the_offline_judges_record_holds(name):
    """data/measured/judges.json (the README's judges table) is what the offline judges give today on every set they are checked
    on: a changed judge, rule or set fails here until `fanin judge-check judge=NAME --record data/measured` is rerun."""
    from fanin.run.components import make_judge
    from fanin.core.config import compose
    rec = json.loads((ROOT / "data" / "measured" / "judges.json").read_text())["judges"][name]
    judge = make_judge(compose([f"judge={name}"]).judge)
    assert rec["setting"] == json.loads(json.dumps(judge.setting(), default=str)), f"{name}'s setting changed since its record"
    sets = judge.case_sets()
    assert set(sets) == set(rec["sets"]), f"{name} is checked on {sorted(sets)}, its record on {sorted(rec['sets'])}"
    for set_name, path in sets.items():
        df, s = judge_check(judge, load_cases(path))
        kept = rec["sets"][set_name]
        assert (s["n"], round(s["accuracy"], 4), round(s["kappa"], 4)) == (kept["n"], kept["accuracy"], kept["kappa"]), (name, set_name)
        assert kept["held_out"] == (set_name != "tuning" and judge.held_out(path)), (name, set_name)
