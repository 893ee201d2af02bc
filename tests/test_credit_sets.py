"""The credit rule's labelled pairs (data/credit_meta): two frozen files of 120 (unit, page, carries it?) pairs, 15 of each of
eight kinds with the kind's label, every page a real WildGraphBench page of the file's six domains; and the record
data/measured/credit.json (both credit rules' precision and recall on them, the README's credit line) is what the rules give
today on the real corpus."""
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import need_real_data

ROOT = Path(__file__).resolve().parents[1]
META = ROOT / "data" / "credit_meta"
KIND_LABEL = {"verbatim_chunk": 1, "faithful_short": 1, "quote_in_long": 1, "paraphrased_summary": 1, "shared_entities": 0,
              "same_topic": 0, "long_unrelated_summary": 0, "generic": 0}
DOMAINS = {"calibration_pairs.jsonl": {"culture", "nature", "technology", "people", "health", "history"},
           "heldout_pairs.jsonl": {"geography", "mathematics", "religion", "society", "human_activities", "philosophy"}}


def _rows(name): return [json.loads(l) for l in (META / name).read_text(encoding="utf-8").splitlines() if l.strip()]


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_each_file_has_fifteen_pairs_of_each_kind_from_its_domains(name):
    rows = _rows(name)
    assert Counter(r["kind"] for r in rows) == {k: 15 for k in KIND_LABEL} and len({r["id"] for r in rows}) == 120
    assert all(r["label"] == KIND_LABEL[r["kind"]] for r in rows)
    assert {r["domain"] for r in rows} == DOMAINS[name] and all(r["doc_id"].startswith(r["domain"] + "/") for r in rows)
    readme = (META / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"\b([0-9a-f]{64})\s+data/credit_meta/" + re.escape(name) + r"\b", readme)
    assert stated == [hashlib.sha256((META / name).read_bytes()).hexdigest()], f"{name} differs from its checksum: write a new file"


def test_the_credit_record_holds_and_the_readme_line_is_read_from_it(real_data_root, tmp_path):
    """Both rules rescored on the real corpus give the record's figures; the README's credit line is rendered from it."""
    need_real_data(real_data_root, "the WildGraphBench corpus")
    from fanin.results.lab_report import credit_record, credit_summary
    kept = json.loads((ROOT / "data" / "measured" / "credit.json").read_text())
    fresh = json.loads(credit_record(tmp_path, [f"dataset.root={real_data_root}"]).read_text())
    assert fresh["sets"] == kept["sets"] and fresh["rules"] == kept["rules"]
    held = kept["sets"]["heldout_pairs.jsonl"]
    assert held["rare_wording"]["recall"] > held["wording"]["recall"] and held["rare_wording"]["precision"] >= 0.95
    readme = (ROOT / "README.md").read_text()
    assert credit_summary(kept) in readme, f"README should hold the line: {credit_summary(kept)}"
