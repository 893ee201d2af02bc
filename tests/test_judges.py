"Scoring rules of the answer judges on hand-made cases (no LLM)."
import math

import pandas as pd
import pytest

from fanin.judging.proxy_judges import ProxyJudge
from fanin.judging.judges import (ac_normalise, answer_table, containment, exact_match, gb_ar, gb_choice_accuracy,
                          gb_multi_select_accuracy, pooled_accuracy, statement_prf, summary_aggregate, token_f1)
from fanin.core.schema import Answer, Instance


def test_ac_normalise():
    assert [ac_normalise(s) for s in (0, 1, 2, 3)] == [0, pytest.approx(100 / 3), pytest.approx(200 / 3), 100]
    with pytest.raises(ValueError): ac_normalise(4)


def test_exact_match_and_token_f1():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1
    assert token_f1("completed in 1889", "it was completed in 1889") == pytest.approx(2 * 1 * 0.6 / 1.6)
    assert token_f1("", "x") == 0 and token_f1("cats", "dogs") == 0


def test_containment_uses_content_words():
    assert containment("Ross Marquand voices Ultron", "Ultron is voiced by Ross Marquand") == pytest.approx(3 / 4)
    assert math.isnan(containment("anything", "the of and"))  # no content word in the gold: undefined, not 0


def test_statement_prf_and_both_aggregations():
    assert statement_prf(4, 3, 5, 2) == pytest.approx({"precision": 75, "recall": 40, "f1": 2 * 75 * 40 / 115})
    empty = statement_prf(0, 0, 3, 0)
    assert math.isnan(empty["precision"]) and empty["recall"] == 0 and empty["f1"] == 0
    with pytest.raises(ValueError): statement_prf(2, 3, 2, 1)
    df = pd.DataFrame([statement_prf(2, 2, 2, 1), statement_prf(4, 1, 2, 2)])  # P 100/25, R 50/100
    agg = summary_aggregate(df)
    assert agg["f1_macro"] == pytest.approx((2 * 100 * 50 / 150 + 2 * 25 * 100 / 125) / 2)
    assert agg["f1_of_means"] == pytest.approx(2 * 62.5 * 75 / 137.5)
    assert agg["f1_macro"] != pytest.approx(agg["f1_of_means"])


def test_pooled_accuracy_skips_missing_not_zero():
    assert pooled_accuracy([100, 0, 100, float("nan")]) == pytest.approx(200 / 3)


def test_graphrag_bench_rules():
    assert gb_choice_accuracy("The answer is B.", "B", "MC") == 1 and gb_choice_accuracy("B or C", "B", "MC") == 0
    assert gb_choice_accuracy("False.", "false", "TF") == 1 and gb_choice_accuracy("True", "False", "TF") == 0
    assert gb_multi_select_accuracy("A, C, D", "A C D") == 1
    assert gb_multi_select_accuracy("A and C", "A, C, D") == 0.5
    assert gb_multi_select_accuracy("A, E", "A, C") == 0 and gb_multi_select_accuracy("", "A") == 0
    table = {(1, 1): 1, (1, 0.5): 0.5, (1, 0): 0, (0, 1): 0.5, (0, 0.5): 0.25, (0, 0): 0, (0.5, 1): 0, (0.5, 0): 0}
    for (acc, r), ar in table.items(): assert gb_ar(acc, r) == ar, (acc, r)
    assert gb_ar(0.5, 0.5, half_credit="as_correct") == 0.5
    with pytest.raises(ValueError): gb_ar(0.7, 1)


def _inst(qtype, **kw):
    return Instance(id="q", dataset="d", query="q?", qtype=qtype, fan_in=0, **kw)


def _ans(text, status="ok"):
    return Answer(instance_id="q", system="bm25", reader="r", status=status, text=text, error="" if status == "ok" else "timeout")


def test_proxy_judge_fact_and_summary_and_failures():
    j = ProxyJudge(threshold=0.5)
    fact = _inst("single-fact", answer="Ross Marquand voices Ultron, replacing James Spader.")
    ok = j.judge(fact, _ans("Ultron is voiced by Ross Marquand instead of James Spader."))
    assert ok.status == "ok" and ok.kind == "proxy" and ok.scores["proxy_accuracy"] == 100
    miss = j.judge(fact, _ans("I do not know."))
    assert miss.scores["proxy_accuracy"] == 0
    failed = j.judge(fact, _ans("", status="failed"))
    assert failed.status == "failed" and failed.scores == {} and "timeout" in failed.error
    summ = _inst("summary", gold_statements=["The special aired on November 4, 2014.", "Emily VanCamp hosted the special."])
    s = j.judge(summ, _ans("The special aired on November 4, 2014. It was a big success."))
    assert s.scores["proxy_recall"] == 50 and s.scores["proxy_precision"] == 50
    nogold = j.judge(_inst("single-fact"), _ans("x"))
    assert nogold.status == "failed" and "no gold" in nogold.error


def test_answer_table_counts_missing_and_excludes_it_from_means():
    df = pd.DataFrame([
        {"instance_id": "a", "system": "s", "judge": "proxy", "kind": "proxy", "fan_in_bin": "single", "status": "ok", "error": "", "acc": 100.0},
        {"instance_id": "b", "system": "s", "judge": "proxy", "kind": "proxy", "fan_in_bin": "single", "status": "ok", "error": "", "acc": 0.0},
        {"instance_id": "c", "system": "s", "judge": "proxy", "kind": "proxy", "fan_in_bin": "single", "status": "failed", "error": "x", "acc": None}])
    t = answer_table(df, ["judge", "system", "fan_in_bin"])
    row = t.iloc[0]
    assert row.questions == 3 and row.judged == 2 and row.missing == 1 and row.acc == 50
