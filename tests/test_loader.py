"The WildGraphBench loader on the real data, and on the hand-made fixture."
import collections

import pytest

from fanin.schema import STATS_COLUMNS, stats_table
from fanin.wildgraphbench import WildGraphBench, page_file_name
from conftest import FIXTURE


@pytest.fixture(scope="module")
def bench(real_data_root):
    return WildGraphBench(real_data_root)


def test_question_counts(bench):
    insts = bench.instances()
    assert len(insts) == 1197
    assert collections.Counter(i.qtype for i in insts) == {"single-fact": 667, "multi-fact": 191, "summary": 339}
    assert len({i.id for i in insts}) == 1197


def test_every_ref_url_resolves(bench):
    s = bench.resolution_summary()
    assert s["ref_urls"] == 2764 and s["resolved"] == 2764 and s["unresolved"] == 0
    assert s["via_url_without_fragment"] == 29          # PROVENANCE.md: 29 match only without the stored #fragment
    assert s["cited_pages"] == 2090                     # PROVENANCE.md: 2,090 of 3,893 pages are cited


def test_fan_in_distribution_matches_provenance(bench):
    by = collections.defaultdict(collections.Counter)
    for i in bench.instances():
        by[i.qtype][min(i.fan_in, 5)] += 1
    assert by["single-fact"] == {1: 666, 2: 1}
    assert by["multi-fact"] == {2: 130, 3: 40, 4: 12, 5: 9}
    assert sum(v for k, v in by["summary"].items() if k >= 5) == 143
    assert max(i.fan_in for i in bench.instances() if i.qtype == "multi-fact") == 22


def test_gold_docs_exist_in_corpus(bench):
    math = bench.corpus("mathematics")
    for i in bench.instances("mathematics"):
        assert i.gold_docs and all(g in math for g in i.gold_docs)


def test_stats_table_shape(bench):
    st = stats_table(bench)
    assert list(st.columns) == STATS_COLUMNS
    row = st[(st.domain == "all") & (st.qtype == "all")].iloc[0]
    assert row.questions == 1197 and row.unresolved_refs == 0


def test_page_file_name_rule():
    assert page_file_name("10.1007/978-1-4419-6633-9_11") == "101007978-1-4419-6633-9 11.txt"
    assert page_file_name("All the big Deadpool & Wolverine cameos") == "All the big Deadpool Wolverine cameos.txt"


def test_fixture_resolution_and_unresolved_is_reported():
    b = WildGraphBench(FIXTURE, domains=["nature"])
    insts = b.instances()
    assert [i.fan_in for i in insts] == [1, 2, 3, 0]
    assert insts[1].qtype == "multi-fact"
    s = b.resolution_summary()
    assert s["unresolved"] == 1 and s["via_url_without_fragment"] == 1
    assert insts[3].meta["unresolved_refs"] == ["https://example.org/not-in-references"]
    # boilerplate is stripped
    doc = b.corpus("nature")["nature/Typhoon Vicente Signal No 10 raised"]
    assert "https://" not in doc.text and "Hurricane Signal No. 10" in doc.text


def test_cli_stats_on_real_data(real_data_root):
    import subprocess, sys, io
    import pandas as pd
    r = subprocess.run([sys.executable, "-m", "fanin.cli", "stats", "dataset=wildgraphbench"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df.columns) == STATS_COLUMNS and len(df) == 13 * 4
    tot = df[(df.domain == "all")].set_index("qtype")
    assert tot.loc["single-fact", "questions"] == 667 and tot.loc["multi-fact", "questions"] == 191 and tot.loc["summary", "questions"] == 339
    assert tot.loc["multi-fact", "fan_in_2"] == 130 and tot.loc["all", "unresolved_refs"] == 0
