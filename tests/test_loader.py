"The WildGraphBench loader on the real data, and on the hand-made fixture."
import collections

import pytest

from fanin.core.schema import STATS_COLUMNS, stats_table
from fanin.data.wildgraphbench import WildGraphBench, page_file_name
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


def test_fan_in_distribution_counts_documents(bench):
    """PROVENANCE.md's fan-in counts pages (single-fact 666x1 and 1x2; multi-fact 12x4, 9x5+); the lab counts one url once, so the
    two urls listed under two titles each (4 citations) lose their second page: single-fact 667x1, multi-fact 13x4 and 8x5+."""
    by = collections.defaultdict(collections.Counter)
    for i in bench.instances():
        by[i.qtype][min(i.fan_in, 5)] += 1
    assert by["single-fact"] == {1: 667}
    assert by["multi-fact"] == {2: 130, 3: 40, 4: 13, 5: 8}
    assert sum(v for k, v in by["summary"].items() if k >= 5) == 143
    assert max(i.fan_in for i in bench.instances() if i.qtype == "multi-fact") == 22


def test_a_url_under_two_titles_is_one_gold_document(bench):
    "The release's two urls listed under two titles (two fetches of one article each): reported, counted once, the copy a distractor."
    s = bench.same_url
    assert len(s) == 4 and s.ref_url.nunique() == 2 and set(s.domain) == {"human_activities"} and s.line.tolist() == [74, 92, 105, 127]
    insts = {i.id: i for i in bench.instances("human_activities")}
    for r in s.itertuples():
        assert r.gold_doc in insts[r.question_id].gold_docs and r.other_docs not in insts[r.question_id].gold_docs
        assert r.other_docs in bench.corpus("human_activities")
    assert bench.resolution_summary()["same_url_pages_not_counted"] == 4


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
    r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "stats", "dataset=wildgraphbench"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df.columns) == STATS_COLUMNS and len(df) == 13 * 4
    tot = df[(df.domain == "all")].set_index("qtype")
    assert tot.loc["single-fact", "questions"] == 667 and tot.loc["multi-fact", "questions"] == 191 and tot.loc["summary", "questions"] == 339
    assert tot.loc["multi-fact", "fan_in_2"] == 130 and tot.loc["all", "unresolved_refs"] == 0
