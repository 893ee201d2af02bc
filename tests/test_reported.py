"""The papers' tables as data (fanin.results.papers, fanin.results.paper_checks, fanin.results.paper_figures, fanin.results.paper_comparisons): loader, spot checks against the papers, consistency checks on hand-made
tables with known mismatches, figures from the reported numbers alone, and configured comparisons."""
import re

import pandas as pd
import pytest

from fanin.results.papers import COLUMNS, ReportedError, load_reported, read_reported, reported_files, reported_index, select
from fanin.results.paper_checks import (check_authtrace_all_vs_bins, check_authtrace_g3, check_count_totals, check_graal_overall,
                                check_graphrag_bench_averages, check_restated, check_wgb_avg_acc, check_wgb_summary_f1, consistency)
from fanin.results.paper_figures import FIGURES, reported_figures
from fanin.results.paper_comparisons import _count, compare

# Rows per table, from each table's layout in the paper (row labels x columns); see each file's `# layout:` line.
EXPECTED_ROWS = {
    "wildgraphbench_table1": 4, "wildgraphbench_table2": 48, "wildgraphbench_table3": 54, "wildgraphbench_table4": 16,
    "wildgraphbench_table5": 12, "wildgraphbench_table6": 43, "wildgraphbench_table7": 6, "wildgraphbench_table8": 3,
    "wildgraphbench_table9": 52, **{f"wildgraphbench_table{i}": 48 for i in range(10, 22)}, "wildgraphbench_fig4": 2,
    "wildgraphbench_v1_table1": 4, "wildgraphbench_v1_table2": 48, "wildgraphbench_v1_table3": 54, "wildgraphbench_v1_table4": 16,
    "wildgraphbench_v1_table5": 52, **{f"wildgraphbench_v1_table{i}": 48 for i in range(6, 18)},
    "wildgraphbench_v1_fig4": 2, "wildgraphbench_v1_fig5": 1,
    "authtrace_table1": 96, "authtrace_table2": 20, "authtrace_table4": 18, "authtrace_tableG3": 28, "authtrace_table9": 9,
    "authtrace_table10": 7, "authtrace_table11": 12, "authtrace_fig3": 5, "authtrace_fig4": 6, "authtrace_fig5": 10,
    "authtrace_fig8": 4, "authtrace_fig9": 7,
    "graphrag_bench_table2": 27, "graphrag_bench_table3": 18, "graphrag_bench_table4": 84, "graphrag_bench_table5": 168,
    "graphrag_bench_table6": 54, "graphrag_bench_table7": 8, "graphrag_bench_table8": 60, "graphrag_bench_table9": 120,
    "graphrag_bench_table10": 60, "graphrag_bench_table11": 120, "graphrag_bench_table12": 108, "graphrag_bench_table13": 216,
    "graphrag_bench_table14": 12,
    "graal_table1": 12, "graal_table2": 3, "graal_table3": 9, "graal_fig2": 1,
    "hipporag_table2": 30, "hipporag2_table3": 9,
}


@pytest.fixture(scope="module")
def rep():
    return load_reported()


def test_every_table_loads_with_its_row_count():
    idx = reported_index()
    got = dict(zip(idx.file.str[:-4], idx.rows))
    assert got == EXPECTED_ROWS
    for f in reported_files():  # the layout line states the same count
        m = re.search(r"= (\d+) rows", read_reported(f).attrs["header"].get("layout", ""))
        if m: assert int(m.group(1)) == got[f.stem], f.name


@pytest.mark.parametrize("paper,table,method,metric,setting,value", [
    ("wildgraphbench", "table2", "HippoRAG2", "avg_acc", {"subset": "all"}, 64.33),
    ("wildgraphbench", "table2", "LinearRAG", "summary_precision", {"subset": "all"}, 29.2),
    ("wildgraphbench", "table3", "Human performance", "summary_recall", {"subset": "people"}, 38.59),
    ("wildgraphbench", "table4", "Ours", "edges", {}, 37246),
    ("wildgraphbench", "table9", "WildGraphBench", "questions", {"domain": "human_activities", "qtype": "multi-fact"}, 13),
    ("wildgraphbench", "table17", "NaiveRAG", "avg_acc", {"domain": "people"}, 62.38),
    ("authtrace", "table1", "HippoRAG2", "ep", {"fan_in": "all"}, 2.1),
    ("authtrace", "table1", "LLM-Wiki", "er", {"fan_in": "all"}, 88.7),
    ("authtrace", "tableG3", "HippoRAG2", "oracle_normalized_loss", {}, 29.4),
    ("graphrag_bench", "table4", "BM-25", "accuracy", {"qtype": "TF"}, 84.49),
    ("graphrag_bench", "table3", "HippoRAG", "indexing_time", {}, 4695.29),
    ("graal", "table1", "GRAAL", "avg_sentences", {}, 116.3),
    ("graal", "table1", "Entity + Mention", "hit_rate", {}, 78.9),
])
def test_spot_check_cells_against_the_papers(rep, paper, table, method, metric, setting, value):
    r = select(rep[(rep.paper == paper) & (rep.table == table)], method=method, metric=metric, **setting)
    assert len(r) == 1 and r.value.iloc[0] == pytest.approx(value)


def test_malformed_file_names_file_line_field_and_value(tmp_path):
    f = tmp_path / "graal_table1.csv"
    f.write_text("# paper: graal\n# table: t\n" + ",".join(COLUMNS) + "\ngraal,table1,GRAAL,dataset=FEVER,hit_rate,1,%,\n"
                 "graal,table1,GRAAL,dataset=FEVER,hit_rate,70.2%,%,\n")
    with pytest.raises(ReportedError, match=r"graal_table1.csv:5: field 'value' = '70.2%'"):
        read_reported(f)
    f.write_text("# paper: graal\n# table: t\n" + ",".join(COLUMNS) + "\ngraal,table1,GRAAL,FEVER,hit_rate,1,%,\n")
    with pytest.raises(ReportedError, match="field 'setting'"):
        read_reported(f)
    f.write_text("# paper: graal\n# table: t\n" + ",".join(COLUMNS) + "\ngraal,table1,GRAAL,dataset=FEVER,hit_rate,,%,\n")
    with pytest.raises(ReportedError, match="field 'note'"):
        read_reported(f)


def _rows(paper, table, cells):
    "A hand-made reported frame: cells = [(method, setting, metric, value-as-printed)]."
    return pd.DataFrame([{"paper": paper, "table": table, "method": m, "setting": s, "metric": k, "value": float(v),
                          "unit": "%", "note": "", "decimals": len(v.split(".")[1]) if "." in v else 0, "line": 0, "file": ""}
                         for m, s, k, v in cells])


def _counts(paper="wildgraphbench"):
    return _rows(paper, "table1", [("WildGraphBench", "qtype=single-fact", "questions", "300"),
                                   ("WildGraphBench", "qtype=multi-fact", "questions", "100"),
                                   ("WildGraphBench", "qtype=all", "questions", "401")])


def test_wgb_checks_on_a_hand_made_table():
    res = _rows("wildgraphbench", "table2", [
        ("A", "subset=all", "avg_acc", "70.00"), ("A", "subset=all", "single_fact_acc", "80.00"), ("A", "subset=all", "multi_fact_acc", "40.00"),
        ("B", "subset=all", "avg_acc", "60.00"), ("B", "subset=all", "single_fact_acc", "80.00"), ("B", "subset=all", "multi_fact_acc", "40.00"),
        ("A", "subset=all", "summary_recall", "20.00"), ("A", "subset=all", "summary_precision", "30.00"), ("A", "subset=all", "summary_f1", "24.00"),
        ("B", "subset=all", "summary_recall", "20.00"), ("B", "subset=all", "summary_precision", "30.00"), ("B", "subset=all", "summary_f1", "20.00")])
    rep = pd.concat([res, _counts()], ignore_index=True)
    acc = pd.DataFrame(check_wgb_avg_acc(rep)).set_index("method")
    assert acc.loc["A", "status"] == "ok" and acc.loc["A", "reading"] == "pooled"          # (300*80 + 100*40)/400 = 70
    assert acc.loc["B", "status"] == "mismatch" and acc.loc["B", "reading"] == "unweighted mean"
    assert acc.loc["B", "difference"] == pytest.approx(-10)
    f1 = pd.DataFrame(check_wgb_summary_f1(rep)).set_index("method")
    assert f1.loc["A", "status"] == "ok" and f1.loc["A", "recomputed"] == pytest.approx(24)
    assert f1.loc["B", "status"] == "mismatch" and "per-question" in f1.loc["B", "reading"]
    tot = pd.DataFrame(check_count_totals(rep))
    assert len(tot) == 1 and tot.status.iloc[0] == "mismatch" and tot.difference.iloc[0] == 1  # 401 printed, 400 summed


def test_authtrace_checks_on_a_hand_made_table():
    cells = []
    for sysname, (s, l, h, a) in {"Oracle": ("80.0", "70.0", "60.0", "74.9"), "X": ("60.0", "40.0", "30.0", "50.0")}.items():
        for b, v in zip(["single", "low", "high", "all"], [s, l, h, a]):
            cells.append((sysname, f"fan_in={b}", "ac", v))
    t1 = _rows("authtrace", "table1", cells)
    g3 = _rows("authtrace", "tableG3", [("Oracle", "fan_in=single_to_high", "relative_degradation", "25.0"),
                                        ("X", "fan_in=single_to_high", "relative_degradation", "50.0"),
                                        ("X", "fan_in=single_to_high", "oracle_normalized_loss", "30.0")])
    rep = pd.concat([t1, g3], ignore_index=True)
    allb = pd.DataFrame(check_authtrace_all_vs_bins(rep)).set_index("method")
    # Oracle: (80*1285 + 70*552 + 60*262) / 2099 = 74.87; X: (60*1285 + 40*552 + 30*262) / 2099 = 51.00
    assert allb.loc["Oracle", "status"] == "ok"
    assert allb.loc["X", "status"] == "mismatch" and allb.loc["X", "difference"] == pytest.approx(50 - 107040 / 2099)
    g = pd.DataFrame(check_authtrace_g3(rep))
    drop = g[(g.method == "X") & (g.quantity.str.startswith("relative"))].iloc[0]
    assert drop.status == "ok" and drop.recomputed == pytest.approx(50)
    loss = g[(g.method == "X") & (g.quantity.str.startswith("oracle"))].iloc[0]
    assert loss.status == "mismatch" and loss.recomputed == pytest.approx(25)  # 50 - 25, printed 30


def test_graphrag_bench_and_graal_checks_on_hand_made_tables():
    gb = _rows("graphrag_bench", "table4", [("M", f"qtype={q}", "accuracy", v) for q, v in
                                            [("FB", "50.00"), ("MC", "60.00"), ("MS", "70.00"), ("TF", "80.00"), ("OE", "90.00"), ("average", "70.00")]]
               + [("N", f"qtype={q}", "accuracy", v) for q, v in
                  [("FB", "50.00"), ("MC", "60.00"), ("MS", "70.00"), ("TF", "80.00"), ("OE", "90.00"), ("average", "72.00")]]
               + [("K", f"qtype={q}", "accuracy", v) for q, v in
                  [("FB", "40.00"), ("MC", "65.00"), ("MS", "55.00"), ("TF", "85.00"), ("OE", "30.00"), ("average", "55.00")]])
    g = pd.DataFrame(check_graphrag_bench_averages(gb)).set_index("method")
    assert g.loc["M", "status"] == "ok" and g.loc["N", "status"] == "mismatch" and g.loc["N", "difference"] == pytest.approx(2)
    gr = _rows("graal", "table1", [("G", "dataset=FEVER", "hit_rate", "70.2"), ("G", "dataset=FEVER", "avg_sentences", "116.3"),
                                   ("G", "dataset=FEVER", "overall", "77"), ("H", "dataset=FEVER", "hit_rate", "70.2"),
                                   ("H", "dataset=FEVER", "avg_sentences", "116.3"), ("H", "dataset=FEVER", "overall", "70")])
    o = pd.DataFrame(check_graal_overall(gr)).set_index("method")
    assert o.loc["G", "status"] == "ok" and o.loc["H", "status"] == "mismatch"


def test_restated_cells_must_agree():
    a = _rows("authtrace", "tableG3", [("X", "fan_in=single", "ac", "60.0"), ("X", "fan_in=high", "ac", "31.0")])
    b = _rows("authtrace", "table1", [("X", "fan_in=single;reader=r", "ac", "60.0"), ("X", "fan_in=high;reader=r", "ac", "30.0")])
    f = pd.DataFrame(check_restated(pd.concat([a, b], ignore_index=True), [("authtrace", "tableG3", {}, "table1", {}, {})]))
    assert list(f.status) == ["ok", "mismatch"]


def test_real_findings_cover_every_check(rep):
    f = consistency(rep)
    assert set(f.check) >= {"wgb_avg_acc", "wgb_summary_f1", "count_totals", "wgb_avg_degree", "authtrace_all_vs_bins",
                            "authtrace_g3", "authtrace_correlation", "graphrag_bench_average", "graal_overall", "restated"}
    # WildGraphBench Table 2's Avg. Acc. is the 667/191-pooled accuracy; its F1 the harmonic mean of averaged P and R
    t2 = f[(f.paper == "wildgraphbench") & (f.table == "table2")]
    assert (t2.status == "ok").all() and len(t2) == 16
    # the paper's r = 0.96 is reproduced over system x bin cells, not over the overall rows
    r = f[(f.check == "authtrace_correlation") & (f.method == "ER vs AC")].set_index("quantity")
    assert r.filter(like="cells", axis=0).status.iloc[0] == "ok" and r.filter(like="overall", axis=0).status.iloc[0] == "mismatch"


def test_figures_from_reported_data_alone(rep, tmp_path):
    paths = reported_figures(rep, tmp_path)
    assert len(paths) == 2 * len(FIGURES)
    for p in paths: assert p.exists() and p.stat().st_size > 5000, p


def test_comparison_by_configuration(rep, tmp_path):
    lab = tmp_path / "lab.csv"
    lab.write_text("# setting: a hand-made lab table\nmethod,avg_sentences,hit_rate\ngraal,100.0,0.5\nother,1,1\n")
    spec = {"paper": "graal", "table": "table1", "lab_table": str(lab), "methods": {"column": "method", "map": {"graal": "GRAAL"}},
            "columns": [{"column": "avg_sentences", "metric": "avg_sentences"}, {"column": "hit_rate", "metric": "hit_rate", "scale": 100}],
            "comparable": False, "reason": "hand-made"}
    cells, setting = compare(spec, rep, "t")
    assert setting == "a hand-made lab table"
    c = cells.set_index("metric")
    assert c.loc["avg_sentences", "reported"] == pytest.approx(116.3) and c.loc["avg_sentences", "difference"] == pytest.approx(-16.3)
    assert c.loc["hit_rate", "lab"] == pytest.approx(50) and not c.comparable.any()
    missing, s = compare({**spec, "lab_table": str(tmp_path / "nope.csv")}, rep, "t")
    assert s is None and len(missing) == 0


def test_block_token_count_matches_whole_text():
    import bpe_openai
    enc = bpe_openai.get_encoding("o200k_base")
    text = "\n".join(f"Line {i}: the WildGraphBench corpus has reference pages." for i in range(3000))
    assert _count(enc, text, block=5000) == len(enc.encode_ordinary(text))
