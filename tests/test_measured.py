"""The measured figures are data: data/measured/figures.csv keeps its schema (every figure with a value, a date or 'not stated',
a machine and the command that measured it; (table, row, figure) unique), and nbs/97_measured.ipynb, which renders every table
of it and checks the quoted figures against the records commands wrote, runs (nbdev-test skips the 9x notebooks by default)."""
import csv
import json
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

from fanin.results.paper_checks import check_authtrace_correlation
from fanin.results.papers import load_reported

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MEASURED = ROOT / "data" / "measured"
COLUMNS = ["topic", "table", "row", "figure", "value", "unit", "date", "machine", "source", "note"]


def test_figures_csv_schema():
    with open(ROOT / "data" / "measured" / "figures.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS, f"figures.csv columns {reader.fieldnames}, expected {COLUMNS}"
        rows = list(reader)
    assert len(rows) > 500
    bad = [(i + 2, c) for i, r in enumerate(rows) for c in ("topic", "table", "row", "figure", "value", "date", "machine", "source")
           if not r[c].strip()]
    assert not bad, f"figures.csv lines with an empty required field: {bad[:10]}"
    keys = [(r["table"], r["row"], r["figure"]) for r in rows]
    assert len(keys) == len(set(keys)), "figures.csv repeats a (table, row, figure)"


def test_measured_notebook_runs():
    r = subprocess.run([str(BIN / "nbdev-test"), "nbs/97_measured.ipynb", "--n-workers", "1"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_the_structured_record_is_the_diagnosed_run_under_the_labs_credit_rule():
    """data/measured/structured_mathematics.json (`fanin.results.lab_report.table_record` of the structured run's overall table) and the
    structured experiment of diagnosis.json are two records of one run: each system's ER agrees, and the record's setting names
    the credit rule the lab uses, so a record measured under another rule (or a re-measure of one record only) fails here."""
    import json
    from fanin.results.lab_report import setting_line
    rec = json.loads((ROOT / "data" / "measured" / "structured_mathematics.json").read_text())
    head = {r["system"]: r for r in json.loads((ROOT / "data" / "measured" / "diagnosis.json").read_text())["experiments"]["structured"]["headroom"]
            if r["fan_in_bin"] == "all"}
    rows = {r["system"]: r for r in rec["rows"]}
    assert set(rows) >= {"bm25", "raptor", "community", "memory", "wiki", "router"}
    for s, r in rows.items():
        assert abs(r["er"] - head[s]["er"]) < 1e-3 and r["questions"] == head[s]["questions"], s
    m = {"data": {"dataset": "d", "commit": "c", "qa_sha1": "q", "domains": ["x"], "clean": True}, "system": "s", "system_hash": "h",
         "k": 5, "config": {"fan_in_bins": [{"name": "all", "lo": 1, "hi": None}], "system": {}}}
    credit = next(p for p in setting_line([m]).split("; ") if p.startswith("credit="))
    assert credit in rec["setting"], f"the record was made under another credit rule than the lab's ({credit}): re-measure it"


# Every table of figures.csv is either bound (BINDINGS: a function that recomputes its numbers from the record, run or data it
# names) or kept as measured (AS_MEASURED: why it cannot be recomputed). A bound table with a reason in AS_MEASURED may leave
# rows unbound; one without must bind every row.
NUMBER = re.compile(r"[−+-]?\d[\d,]*(?:\.\d+)?")


def numbers(text: str) -> list[tuple[float, int]]:
    "Every number written in a figure, with its decimals: '+0.045 [+0.012, +0.078]', '1,197 of 1,197', '2,150–2,532', '98% of 200'."
    out = []
    for m in NUMBER.finditer(text):
        t = m.group().replace("−", "-").rstrip(",").replace(",", "")
        out.append((float(t), len(t.split(".")[1]) if "." in t else 0))
    return out


def record(name: str) -> dict:
    return json.loads((MEASURED / name).read_text())


def _graal_table1():
    rows = {r["method"]: r for r in record("graal_table1.json")["rows"]}
    names = {"Entity + Mention": "entity_mention", "GraphRetrieve": "graph_retrieve", "GRAAL": "graal"}
    cols = {"avg #sentences": "avg_sentences", "avg #documents": "avg_documents", "hit rate": "hit_rate", "overall": "overall"}
    paper = load_reported("graal", "table1").set_index(["method", "metric"]).value
    return {**{(row, fig): [rows[m][c]] for row, m in names.items() for fig, c in cols.items()},
            **{(row, "paper (FEVER): sentences / documents / hit / overall"): [paper[(row, c)] for c in cols.values()] for row in names}}


def _fusion_heldout():
    out = {}
    for split, row in (("questions", "questions → rrf 0.75:1, rrf_k 5, 50 cand."), ("domains", "domains → convex, BM25 share 0.35, 100 cand.")):
        s = record("fusion.json")["splits"][split]
        assert s["chosen"] == ({"fusion": "rrf", "weights": [0.75, 1.0], "rrf_k": 5.0, "candidates": 50} if split == "questions"
                               else {"fusion": "convex", "candidates": 100, "alpha": 0.35}), f"fusion.json {split}: the row names another choice"
        pooled = {r["bin"]: r for r in s["report"] if r["domain"] == "all"}
        cells = [r for r in s["report"] if r["domain"] != "all"]
        for fig, b in (("fan-in 1", "single"), ("fan-in 2", "low"), ("fan-in 3+", "high")):
            out[(row, fig)] = [pooled[b]["margin"], pooled[b]["ci_low"], pooled[b]["ci_high"]]
        out[(row, "cells within noise (point ≥ 0)")] = [sum(r["not_below"] for r in cells), len(cells), sum(r["margin"] >= 0 for r in cells)]
        out[(row, "textbook RRF, point ≥ 0")] = [sum(r["default_margin"] >= 0 for r in cells), len(cells)]
    return out


def _hybrid_summary():
    s = record("fusion.json")["splits"]
    return {(f"split {k}", "tune / report questions"): [s[k]["tune_questions"], s[k]["report_questions"]] for k in s}


def _fault_run():
    f = record("faults.json")
    outcomes = Counter(r["outcome"] for r in f["rows"])
    bad = ["raw traceback", "unclear error", "silent wrong result", "hang", "leak", "data lost"]
    assert set(outcomes) <= {"stopped (clear)", "survived", *bad}, f"faults.json: an outcome the table does not name: {set(outcomes)}"
    return {("fault run", "kinds of fault"): [len(f["rows"])],
            ("fault run", "stopped with a clear error / survived with a correct result"): [outcomes["stopped (clear)"], outcomes["survived"]],
            ("fault run", "raw tracebacks / unclear errors / silent wrong results / hangs / leaks / data lost"): [outcomes[b] for b in bad]}


def _bm25_backends():
    rows = [r for r in record("bm25_backends.json")["rows"] if r["method"] == "okapi"]
    n = sum(r["queries"] for r in rows)
    er = lambda k: sum(r[k] * r["queries"] for r in rows) / n
    assert abs(er("bm25s_er") - er("rank_bm25_er")) < 1e-12, "bm25_backends.json: the two backends' ER differ"
    return {("bm25s (okapi) vs rank-bm25", "identical packs"): [sum(r["identical_packs"] for r in rows), n],
            ("bm25s (okapi) vs rank-bm25", "mean ER"): [er("bm25s_er")],
            ("bm25s (okapi) vs rank-bm25", "p50 (median over domains)"): [statistics.median(r["bm25s_p50_ms"] for r in rows),
                                                                       statistics.median(r["rank_bm25_p50_ms"] for r in rows)]}


def _systems_culture():
    culture = next(r for r in record("bm25_backends.json")["rows"] if r["domain"] == "culture" and r["method"] == "okapi")
    return {("bm25", "ER on culture"): [culture["rank_bm25_er"]]}


def _hipporag_notes():
    rows = {(r["system"], r["fan_in_bin"]): r for r in record("hipporag_recall.json")["rows"] if r["domain"] == "musique_train"}
    reported = load_reported("hipporag", "table2")
    bm25 = reported[(reported.method == "BM25") & (reported.setting == "dataset=musique")].set_index("metric").value
    return {**{(f"MuSiQue · {s}", "ER fan-in 2 → 3+"): [rows[(s, "low")]["er"], rows[(s, "high")]["er"]] for s in ("bm25", "dense")},
            ("BM25 on the papers' 1,000-question MuSiQue sample", "R@2 / R@5 (reported)"): [bm25["recall_at_2"], bm25["recall_at_5"]]}


def _gpu_embedding():
    runs = [(s["label"], r) for s in record("gpu_embedding_h100.json")["studies"] for r in s["runs"]]
    lab = max((r for _, r in runs if r["path"] == "lab" and r["dtype"] == "float16"), key=lambda r: r["windows_per_s"])
    assert lab["windows"] == 107_484, "gpu_embedding_h100.json: the row names 107,484 windows"
    st = [r["windows_per_s"] for _, r in runs if r["path"] == "sentence-transformers" and r["dtype"] == "float16"]
    return {("minilm_gpu", "rate"): [lab["windows_per_s"]], ("minilm_gpu", "time for 107,484 windows"): [lab["seconds"]],
            ("sentence-transformers encode", "rate"): [min(st), max(st)],
            ("minilm_gpu vs CPU fp32", "cosine, min"): [lab["cos_to_cpu_fp32_min"]]}


def _paper_checks():
    rep = load_reported()
    r = {f["quantity"]: f["recomputed"] for f in check_authtrace_correlation(rep) if f["method"] == "ER vs AC"}
    return {("data/reported", "tables / numbers transcribed"): [rep.file.nunique(), len(rep)],
            ("AuthTrace r = 0.96", "recomputed over system × bin cells / over overall rows"):
                [r["pearson r(er, ac) over Table 1 system x bin cells"], r["pearson r(er, ac) over Table 1 overall rows"]]}


BINDINGS = {"graal_table1": _graal_table1, "fusion_heldout": _fusion_heldout, "hybrid_summary": _hybrid_summary, "fault_run": _fault_run,
            "bm25_backends": _bm25_backends, "systems_culture": _systems_culture, "hipporag_notes": _hipporag_notes,
            "gpu_embedding": _gpu_embedding, "paper_checks": _paper_checks}

_TIMING = "the time and cost of a dated run on a named machine: a measurement of that run, which a rerun measures anew, not recomputes"
_SUPERSEDED = "a judge, prompt or credit rule the lab has since replaced, kept for the comparison its note states; the current one is in a record"
AS_MEASURED = {
    **{t: _TIMING for t in ("make_test", "reproduce_summary", "reproduce_targets", "reproduce_cold_avx512", "reproduce_cold_avx2",
                            "reproduce_cold_exact", "opt_in_costs", "bench_avx2", "bench_avx512", "embedded_server", "reader_whole_packs",
                            "answer_stages", "structured_cold", "graph_bench", "embedding_reuse", "structured_cpu_rebuild",
                            "structured_mathematics", "peers_bench_lines")},
    **{t: _SUPERSEDED for t in ("judges_llm_v1", "judge_prompts", "semfact_first_scores", "lens_carried_vs_cited", "reader_judge_ablation",
                                "reader_judge_ablation_notes", "wgb_real_answers", "graphrag_bench_judge")},
    "peers_mathematics": "the peers' runs through the gateway with the embedded 135M model (hours cold); their tables are outputs, not records",
    "peers_notes": "the peers' runs through the gateway with the embedded 135M model (hours cold); their tables are outputs, not records",
    "scale_notes": "figures of the first scale bench (2026-11-25), one marked wrong in its note; scale.json is the current record",
    "reproduce_gpu_projection": "arithmetic on other rows of this file, recomputed in nbs/97_measured.ipynb",
    "gpu_embedding": "the share of identical top-10 lists and the tokenising time are figures of the study's log, not of its record",
    "fault_run": "the count of corrupted-data cases belongs to the first fault run (2026-11-25); faults.json is the current one",
    "bm25_backends": "the Lucene-vs-Okapi overlap is from a run before the record kept only the default method",
    "systems_culture": "the graph systems' ER and every row's cost are figures of a dated make bench on culture, kept as a table, not a record",
    "hybrid_summary": "the textbook and default ER and the grid size are figures of the fusion run's log, not of fusion.json",
    "hipporag_notes": "the run times are measurements of a dated run",
    "paper_checks": "the people-subset disagreement is a range read off the findings table, not one number",
    "wildgraphbench": "computed by `fanin data` from ../shared into outputs/data/resolution.csv, which the repository does not keep",
    "cpu_dependence": "measured under an emulated AVX2 CPU (qemu), which this machine's tests do not run",
    "embedder": "figures of the embedder study notebook and dated benches",
    "reader_models": "a model card's figures (size, licence, context), from its config",
    "graphs_notes": "figures of a dated top-k sweep",
    "routing": "figures of the structured run's routing table, an output, not a record",
}


def test_figures_csv_rows_are_bound_to_their_records_or_kept_as_measured():
    """Each number of a bound row (`BINDINGS`) equals its record's at the precision it is written with, so a re-measured record, a
    changed scorer or a changed dataset fails here until the row follows; every other table states why it is kept as measured."""
    with open(MEASURED / "figures.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    tables = {r["table"] for r in rows}
    assert tables <= set(BINDINGS) | set(AS_MEASURED), f"figures.csv tables neither bound nor kept as measured: {sorted(tables - set(BINDINGS) - set(AS_MEASURED))}"
    assert not (set(BINDINGS) | set(AS_MEASURED)) - tables, "a binding or reason for a table figures.csv no longer has"
    checked, wrong = 0, []
    for table, bind in BINDINGS.items():
        want = bind()
        have = {(r["row"], r["figure"]): r["value"] for r in rows if r["table"] == table}
        assert set(want) <= set(have), f"{table}: bound rows figures.csv lacks: {sorted(set(want) - set(have))}"
        if table not in AS_MEASURED:
            assert set(have) <= set(want), f"{table}: rows neither bound nor given a reason: {sorted(set(have) - set(want))}"
        for key, values in want.items():
            got = numbers(have[key])
            if len(got) != len(values) or any(abs(v - w) > 0.5 * 10 ** -d + 1e-9 for (v, d), w in zip(got, values)):
                wrong.append(f"{table} {key}: figures.csv says {have[key]!r}, the record gives {[round(w, 6) for w in values]}")
            checked += 1
    assert not wrong, "figures.csv rows that drifted from their records:\n" + "\n".join(wrong)
    assert checked >= 40


def test_numbers_reads_every_way_a_figure_is_written():
    assert numbers("+0.045 [+0.012, +0.078]") == [(0.045, 3), (0.012, 3), (0.078, 3)]
    assert numbers("−0.026 [−0.074, +0.021]")[0] == (-0.026, 3)
    assert numbers("1,197 of 1,197") == [(1197.0, 0), (1197.0, 0)] and numbers("2,150–2,532") == [(2150.0, 0), (2532.0, 0)]
    assert numbers("36 / 36 (22)") == [(36.0, 0), (36.0, 0), (22.0, 0)] and numbers("0 / 0 / 0") == [(0.0, 0)] * 3
