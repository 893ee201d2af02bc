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
