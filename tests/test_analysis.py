"Analysis functions against hand-computed values; seeded determinism."
import numpy as np
import pandas as pd
import pytest

from fanin.results.analysis import (correlation, degradation, failure_attribution, failure_overlap, paired_bootstrap,
                            recall_dominance, table_by_bin, table_by_fan_in)

BINS = [{"name": "single", "lo": 1, "hi": 1}, {"name": "low", "lo": 2, "hi": 2}, {"name": "high", "lo": 3, "hi": None}]


def frame():
    # 6 questions (2 per bin) x 2 systems; hand-set values
    rows = []
    fan = {"q1": 1, "q2": 1, "q3": 2, "q4": 2, "q5": 3, "q6": 4}
    er = {"a": [1, 1, 1, 0.5, 0.5, 0], "b": [1, 0, 0.5, 0.5, 0, 0]}
    ac = {"a": [100, 100, 100, 0, 0, 0], "b": [100, 0, 100 / 3, 0, 0, 100 / 3]}
    for s in ("a", "b"):
        for i, q in enumerate(fan):
            rows.append({"instance_id": q, "system": s, "fan_in": fan[q], "domain": "x", "er": er[s][i], "ep": 0.5, "ac": ac[s][i]})
    return pd.DataFrame(rows)


def test_table_layouts():
    t = table_by_bin(frame(), ["er"], BINS).set_index("system")
    assert t.loc["a", "er_single"] == 1 and t.loc["a", "er_low"] == 0.75 and t.loc["a", "er_high"] == 0.25
    assert t.loc["b", "er_all"] == pytest.approx(2 / 6) and t.loc["a", "n_high"] == 2
    f = table_by_fan_in(frame(), "er", cap=3).set_index("system")
    assert f.loc["a", "er_fan_in_3+"] == 0.25 and f.loc["a", "n_3+"] == 2


def test_degradation_matches_authtrace_g3():
    t = pd.DataFrame({"system": ["oracle", "Flat RAG"], "ac_single": [81.6, 72.8], "ac_high": [69.8, 32.7]})
    g = degradation(t, "ac").set_index("system")
    assert g.loc["oracle", "rel_drop_pct"] == pytest.approx(14.46, abs=0.01)
    assert g.loc["Flat RAG", "oracle_norm_pp"] == pytest.approx(55.08 - 14.46, abs=0.01)  # the paper: 40.6pp
    assert np.isnan(g.loc["oracle", "oracle_norm_pp"])


def test_correlation_point_estimate_and_determinism():
    df = frame()
    c = correlation(df, "er", "ac", BINS, n_boot=200, seed=3)
    cells = table_by_bin(df, ["er", "ac"], BINS)
    x = cells[["er_single", "er_low", "er_high"]].to_numpy().ravel()
    y = cells[["ac_single", "ac_low", "ac_high"]].to_numpy().ravel()
    assert c["r"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert c["ci_low"] <= c["r"] <= c["ci_high"] or np.isnan(c["ci_low"])
    assert correlation(df, "er", "ac", BINS, n_boot=200, seed=3) == c


def test_paired_bootstrap_by_hand():
    pb = paired_bootstrap(frame(), "ac", BINS, n_boot=2000, seed=0).set_index("fan_in_bin")
    s = pb.loc["single"]
    assert (s.best, s.runner_up) == ("a", "b") and s["diff"] == pytest.approx(50) and s.paired_questions == 2
    # the two paired differences are 0 and 100: resampled means are 0, 50 or 100, so the CI is [0, 100]
    assert s.ci_low == 0 and s.ci_high == 100 and not s.significant
    again = paired_bootstrap(frame(), "ac", BINS, n_boot=2000, seed=0)
    pd.testing.assert_frame_equal(again, paired_bootstrap(frame(), "ac", BINS, n_boot=2000, seed=0))


def test_failure_attribution_and_jaccard_by_hand():
    fa = failure_attribution(frame()).set_index("system")
    # a fails q4, q5, q6 (ac 0) with er 0.5, 0.5, 0 -> one of three below 0.5
    assert fa.loc["a", "failed"] == 3 and fa.loc["a", "failed_with_low_er"] == 1
    # b fails q2, q3 (33.3 <= 100/3), q4, q5, q6 -> 5 failures; er < 0.5 for q2, q5, q6
    assert fa.loc["b", "failed"] == 5 and fa.loc["b", "share_low_er"] == pytest.approx(3 / 5)
    jo = failure_overlap(frame()).iloc[0]
    assert jo.both_failed == 3 and jo.jaccard == pytest.approx(3 / 5)


def test_recall_dominance():
    sw = pd.DataFrame({"system": ["s"] * 4 + ["t"] * 4, "k": [2, 5, 10, 15] * 2,
                       "ac": [40, 50, 55, 57, 50, 45, 40, 30], "ep": [.5, .4, .3, .2] * 2, "er": [.4, .6, .7, .8] * 2})
    r = recall_dominance(sw).set_index("system")
    assert r.loc["s", "recall_dominant"] and not r.loc["t", "recall_dominant"]
