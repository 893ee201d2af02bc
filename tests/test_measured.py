"""The measured figures are data: data/measured/figures.csv keeps its schema (every figure with a value, a date or 'not stated',
a machine and the command that measured it; (table, row, figure) unique), and nbs/97_measured.ipynb, which renders every table
of it and checks the quoted figures against the records commands wrote, runs (nbdev-test skips the 9x notebooks by default)."""
import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
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


# figures.csv tables whose numbers a record holds: (record file, figures.csv row -> record row key, figure -> record column)
BOUND = {"graal_table1": ("graal_table1.json", "method", {"Entity + Mention": "entity_mention", "GraphRetrieve": "graph_retrieve", "GRAAL": "graal"},
                          {"avg #sentences": "avg_sentences", "avg #documents": "avg_documents", "hit rate": "hit_rate", "overall": "overall"})}


def test_figures_csv_rows_a_record_holds_are_that_records_numbers():
    """The rows of a figures.csv table bound to a record (`BOUND`: `fanin table NAME --record data/measured`) state that record's
    numbers at the precision they are written with; a re-measured record that moves a number fails here until the row follows."""
    import json
    with open(ROOT / "data" / "measured" / "figures.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    checked = 0
    for table, (file, key, row_map, fig_map) in BOUND.items():
        rec = {r[key]: r for r in json.loads((ROOT / "data" / "measured" / file).read_text())["rows"]}
        for r in rows:
            if r["table"] != table or r["figure"] not in fig_map: continue
            text = r["value"].replace(",", "")
            want = rec[row_map[r["row"]]][fig_map[r["figure"]]]
            decimals = len(text.split(".")[1]) if "." in text else 0
            assert float(text) == round(want, decimals), f"figures.csv {table} {r['row']} {r['figure']} = {r['value']}, {file} holds {want}"
            checked += 1
    assert checked == 12
