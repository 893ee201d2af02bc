"""HippoRAG's dataset layout (NAME.json + NAME_corpus.json) as a lab dataset: the hand-written fixture in both shapes (MuSiQue's
`paragraphs` with a list corpus, HotpotQA's `supporting_facts` with a title -> sentences corpus), bad input stopped before work
with file, record, field and fix, the real training samples beside the checkout, and passage Recall@k through the pipeline."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import need_real_data

from fanin.core.config import ConfigError
from fanin.data.hipporag_format import HippoRAGFormat
from fanin.core.schema import DataError, dataset_gaps

ROOT = Path(__file__).resolve().parents[1]
FX = ROOT / "tests" / "fixtures" / "hipporag_tiny"
SAMPLES = ROOT.parent / "shared" / "data" / "hipporag_samples"


def test_the_fixture_in_both_shapes():
    ds = HippoRAGFormat(FX)
    assert not dataset_gaps(ds) and ds.domains == ["tinyhotpot", "tinymusique"] and ds.broad_qtypes == frozenset()
    mu = {i.id: i for i in ds.instances("tinymusique")}
    assert mu["tinymusique/2hop__1_2"].gold_docs == ["Harbor Lighthouse", "Mara Voss"] and mu["tinymusique/2hop__1_2"].fan_in == 2
    assert mu["tinymusique/3hop1__3_4_5"].gold_docs == ["Harbor Lighthouse", "Mara Voss", "Kelden #1"]   # a repeated title: numbered
    assert {d.id for d in ds.corpus("tinymusique")} >= {"Kelden #1", "Kelden #2"} and len(ds.corpus("tinymusique")) == 6
    assert [i.qtype for i in ds.instances("tinymusique")] == ["2hop", "3hop1"]
    hp = ds.instances("tinyhotpot")
    assert [i.gold_docs for i in hp] == [["Grey Sea", "Tallin Bay"], ["Tallin Bay", "Ada Tallin"]] and {i.qtype for i in hp} == {"bridge", "comparison"}
    assert ds.corpus("tinyhotpot")["Grey Sea"].text == "Grey Sea\nThe Grey Sea is a cold inland sea. Its largest port is Tallin Bay."
    assert HippoRAGFormat(FX, title_in_text=False).corpus("tinyhotpot")["Grey Sea"].text.startswith("The Grey Sea")
    by_title = HippoRAGFormat(FX, domains=["tinymusique"], unit="title")
    assert len(by_title.corpus("tinymusique")) == 5 and "Kelden" in by_title.corpus("tinymusique")
    assert by_title.instances()[1].gold_docs[-1] == "Kelden"


def _broken(tmp_path, edit):
    d = tmp_path / "data"
    shutil.copytree(FX, d)
    q = json.loads((d / "tinymusique.json").read_text())
    edit(q)
    (d / "tinymusique.json").write_text(json.dumps(q))
    with pytest.raises(DataError) as e:
        HippoRAGFormat(d)
    return e.value


def test_bad_records_stop_before_work_naming_file_record_and_field(tmp_path):
    def edit(q):
        q[0]["question"] = ""                                             # empty field
        q[1]["paragraphs"][2]["paragraph_text"] = "a passage the corpus lacks"   # a gold passage not in the corpus
    err = _broken(tmp_path, edit)
    got = {(Path(p.path).name, p.line, p.field) for p in err.problems}
    assert got == {("tinymusique.json", 1, "question"), ("tinymusique.json", 2, "paragraphs[2]")}
    assert "tinymusique_corpus.json" in str(err)   # the fix names the corpus file the passage was looked for in
    err = _broken(tmp_path / "b", lambda q: q[0]["paragraphs"][0].update(is_supporting="yes"))
    assert [(p.line, p.field) for p in err.problems] == [(1, "paragraphs[0]")]
    err = _broken(tmp_path / "c", lambda q: q.append(dict(q[0])))          # a duplicated question id
    assert [(p.line, p.field) for p in err.problems] == [(3, "id")]
    err = _broken(tmp_path / "d", lambda q: [p.update(is_supporting=False) for p in q[0]["paragraphs"]])
    assert [(p.line, p.field) for p in err.problems] == [(1, "paragraphs")]


def test_bad_files_and_settings_say_what_to_do(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(FX, d)
    (d / "tinyhotpot_corpus.json").write_text('{"Grey Sea": ["cut')
    with pytest.raises(DataError, match=r"tinyhotpot_corpus.json, line 1: field '<json>'"):
        HippoRAGFormat(d)
    with pytest.raises(ConfigError, match="no NAME.json beside a NAME_corpus.json"):
        HippoRAGFormat(tmp_path)
    with pytest.raises(ConfigError, match=r"dataset.domains: \['nope'\]"):
        HippoRAGFormat(FX, domains=["nope"])
    with pytest.raises(ConfigError, match="dataset.unit"):
        HippoRAGFormat(FX, unit="page")


def test_the_real_samples_load_as_their_provenance_says():
    need_real_data(SAMPLES, "the HippoRAG-format samples")
    ds = HippoRAGFormat(SAMPLES)
    mu, hp = ds.instances("musique_train"), ds.instances("hotpotqa_train")
    assert len(mu) == len(hp) == 100 and len(ds.corpus("musique_train")) == 1890 and len(ds.corpus("hotpotqa_train")) == 994
    assert {n: sum(i.fan_in == n for i in mu) for n in (2, 3, 4)} == {2: 68, 3: 27, 4: 5}
    assert all(i.fan_in == 2 for i in hp) and sum(i.qtype == "bridge" for i in hp) == 78
    assert all(d in ds.corpus(i.domain) for i in ds.instances() for d in i.gold_docs)


def test_passage_recall_through_the_pipeline(tmp_path):
    from fanin.run.pipeline import run
    (folder,) = run(["dataset=hipporag", f"dataset.root={FX}", "system=bm25", f"paths.outputs={tmp_path}", "progress=false",
                     "experiment_name=t", "k=5"])
    m = pd.read_csv(folder / "metrics.csv")
    assert {"recall@2", "recall@5"} <= set(m.columns) and len(m) == 4 and (m.status == "ok").all()
    assert (m["recall@2"] <= m["recall@5"]).all() and (m["recall@5"] <= m.er + 1e-9).all()
    t = pd.read_csv(folder / "tables" / "by_fan_in_bin.csv")
    assert {"recall@2", "recall@5"} <= set(t.columns)


def test_a_recall_row_is_comparable_only_on_the_papers_evaluation_files(tmp_path):
    """The HippoRAG comparison marks a row comparable only when the lab's table names the released evaluation files' git blob ids
    (its data snapshot); the training samples' table is not comparable and says why."""
    import yaml
    from fanin.results.papers import load_reported
    from fanin.results.paper_comparisons import compare
    spec = yaml.safe_load((ROOT / "configs" / "reproduction" / "hipporag_table2_recall.yaml").read_text())
    rows = "domain,system,fan_in_bin,questions,er,ep,hit,recall@2,recall@5\nmusique,bm25,all,1000,0.5,0.2,0.1,0.33,0.42\n"
    rep = load_reported("hipporag")
    for data, expect in (("musique.json:fc0fcba0,musique_corpus.json:01ebb7c8", True), ("musique.json:0123abcd,musique_corpus.json:01ebb7c8", False)):
        lab = tmp_path / f"{expect}.csv"
        lab.write_text(f"# setting: passage recall: data=hipporag@{data} (qa x, 1 domains, clean=False); systems=bm25@x\n" + rows)
        cells, _ = compare({**spec, "lab_table": str(lab)}, rep, "t")
        assert len(cells) == 2 and set(cells.method) == {"BM25"} and set(cells.setting) == {"dataset=musique"}
        assert cells.comparable.tolist() == [expect, expect]
        assert sorted(cells.lab.round(1)) == [33.0, 42.0] and sorted(cells.reported) == [32.3, 41.2]
        assert ("evaluation files" in cells.reason.iloc[0]) if expect else ("training samples" in cells.reason.iloc[0])


# ---- keys and passages written twice, files that are not files --------------------------------------------------------------
def _copy(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(FX, d)
    return d


def test_a_corpus_title_written_twice_with_different_text_stops_naming_its_questions(tmp_path):
    d = _copy(tmp_path)
    c = d / "tinyhotpot_corpus.json"
    text = c.read_text()
    c.write_text(text.rstrip()[:-1].rstrip() + ',\n "Grey Sea": ["The Grey Sea is a warm sea."]\n}\n')   # json.load would keep this one
    with pytest.raises(DataError) as e:
        HippoRAGFormat(d)
    (p,) = e.value.problems
    assert (Path(p.path).name, p.line, p.field) == ("tinyhotpot_corpus.json", 1, "'Grey Sea'")
    assert "tinyhotpot.json record 1 cites the title" in str(e.value) and "\n" not in str(e.value)


def test_a_corpus_title_written_twice_with_the_same_text_is_read_once_and_reported(tmp_path):
    from fanin.core.schema import DataWarning
    d = _copy(tmp_path)
    c = d / "tinyhotpot_corpus.json"
    c.write_text(c.read_text().rstrip()[:-1].rstrip() + ',\n "Ada Tallin": ["Ada Tallin was a merchant of furs and amber."]\n}\n')
    with pytest.warns(DataWarning, match=r"1 passage\(s\) repeat an earlier one exactly.*title written twice at entry 3 \('Ada Tallin', gold for tinyhotpot.json record 2\)"):
        ds = HippoRAGFormat(d)
    assert len(ds.corpus("tinyhotpot")) == 4 and [r["title"] for r in ds.repeated_passages] == ["Ada Tallin"]


def test_a_field_written_twice_in_a_question_stops(tmp_path):
    d = _copy(tmp_path)
    q = d / "tinymusique.json"
    q.write_text(q.read_text().replace('"answer": "Kelden",', '"answer": "Kelden", "answer": "Harbor",', 1))
    with pytest.raises(DataError) as e:
        HippoRAGFormat(d)
    assert [(Path(p.path).name, p.line, p.field, p.value) for p in e.value.problems] == [("tinymusique.json", 1, "answer", ["Kelden", "Harbor"])]


def test_an_exact_duplicate_gold_passage_is_read_once_naming_its_questions(tmp_path):
    "A gold passage written twice would be two documents, only one of them gold: a system retrieving the other would score a miss."
    from fanin.core.schema import DataWarning
    d = _copy(tmp_path)
    c = d / "tinymusique_corpus.json"
    ps = json.loads(c.read_text())
    c.write_text(json.dumps(ps + [dict(ps[1], text=ps[1]["text"].replace(" ", "  "))], indent=1))   # Mara Voss again, spacing aside
    with pytest.warns(DataWarning) as w:
        ds = HippoRAGFormat(d)
    (msg,) = [str(x.message) for x in w]
    assert "tinymusique_corpus.json: 1 passage(s) repeat an earlier one exactly" in msg
    assert "entry 7 = entry 2 ('Mara Voss', gold for tinymusique.json records 1, 2)" in msg
    assert len(ds.corpus("tinymusique")) == 6 and "Mara Voss #1" not in ds.corpus("tinymusique")
    assert [i.fan_in for i in ds.instances("tinymusique")] == [2, 3]
    assert ds.repeated_passages == [{"file": "tinymusique_corpus.json", "entry": 7, "kept": 2, "title": "Mara Voss", "cited_by": [1, 2]}]


@pytest.mark.parametrize("name", ["tinymusique.json", "tinymusique_corpus.json"])
def test_a_file_that_is_a_fifo_is_named_not_read(tmp_path, name):
    import os
    d = _copy(tmp_path)
    (d / name).unlink()
    os.mkfifo(d / name)
    with pytest.raises(DataError) as e:
        HippoRAGFormat(d)
    assert [(Path(p.path).name, p.value) for p in e.value.problems] == [(name, "a FIFO (named pipe)")]


def test_the_real_samples_hold_no_repeats(tmp_path):
    need_real_data(SAMPLES, "the HippoRAG-format samples")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = HippoRAGFormat(SAMPLES)
    assert ds.repeated_passages == []


def test_the_kept_recall_record_is_what_the_lab_measures_today(tmp_path):
    """data/measured/hipporag_recall.json (the table the README quotes) holds against a fresh run: `bm25` (stop words dropped) and
    `bm25_words` (every word, the papers' tokenization) are run again on the real samples and their passage Recall@2 / @5 and ER
    must equal the record's, so a changed scorer, tokenizer or sample fails here instead of leaving an old figure standing."""
    import json
    from fanin.results.experiments import passage_recall_table
    from fanin.run.pipeline import run
    need_real_data(SAMPLES, "the HippoRAG-format samples")
    rec = json.loads((ROOT / "data" / "measured" / "hipporag_recall.json").read_text())
    ov = ["experiment=hipporag", f"dataset.root={SAMPLES}", f"paths.outputs={tmp_path}", "progress=false", "systems=[bm25,bm25_words]"]
    run(ov)
    fresh = passage_recall_table(ov).frame
    kept = {(r["domain"], r["system"], r["fan_in_bin"]): r for r in rec["rows"]}
    for r in fresh.to_dict("records"):
        k = kept[(r["domain"], r["system"], r["fan_in_bin"])]
        for m in ("er", "recall@2", "recall@5"):
            assert abs(r[m] - k[m]) < 1e-6, f"{r['domain']} {r['system']} {r['fan_in_bin']} {m}: today {r[m]}, kept {k[m]}"
    words = {r["domain"]: r["recall@5"] for r in rec["rows"] if r["system"] == "bm25_words" and r["fan_in_bin"] == "all"}
    lab = {r["domain"]: r["recall@5"] for r in rec["rows"] if r["system"] == "bm25" and r["fan_in_bin"] == "all"}
    assert set(words) == set(lab) == {"musique_train", "hotpotqa_train"}   # both readings on both samples


def test_the_recall_table_leaves_out_a_system_that_does_not_rank(tmp_path):
    "long_context's pack is a slice in name order: Recall@k would measure that order, so the table names it and leaves it out."
    from fanin.results.experiments import passage_recall_table
    from fanin.run.pipeline import run
    ov = ["experiment=hipporag", f"dataset.root={FX}", f"paths.outputs={tmp_path}", "progress=false", "systems=[bm25,long_context]"]
    run(ov)
    t = passage_recall_table(ov)
    assert set(t.frame.system) == {"bm25"} and t.setting.endswith("; not ranked, left out: long_context")


def test_fanin_data_fetches_the_samples_from_a_mirror_and_they_run(tmp_path, monkeypatch, capsys):
    """`fanin data hipporag --dest PATH` puts HippoRAG's pinned samples there, checked by sha256, from a local mirror made here
    (the real files beside the checkout); offline without a mirror it stops in one line; the fetched files load and run."""
    import shutil
    from conftest import need_real_data
    from fanin.doors.cli import main
    from fanin.core.config import repo_root
    from fanin.run.pipeline import run
    src = repo_root().parent / "shared" / "data" / "hipporag_samples"
    need_real_data(src / "musique_train.json", "HippoRAG's samples")
    shutil.copytree(src, tmp_path / "mirror" / "hipporag_samples")
    monkeypatch.delenv("FANIN_DATA_MIRROR", raising=False)
    monkeypatch.setenv("FANIN_OFFLINE", "1")
    with pytest.raises(SystemExit) as e: main(["data", "hipporag", "--dest", str(tmp_path / "hr")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "hipporag_samples is not at" in err and "Traceback" not in err
    monkeypatch.setenv("FANIN_DATA_MIRROR", str(tmp_path / "mirror"))
    main(["data", "hipporag", "--dest", str(tmp_path / "hr")])
    assert f"dataset.root={tmp_path / 'hr'}" in capsys.readouterr().out
    f = run(["dataset=hipporag", f"dataset.root={tmp_path / 'hr'}", "dataset.domains=[musique_train]", f"paths.outputs={tmp_path / 'out'}",
             "progress=false", "experiment_name=test", "system=bm25", "k=5", "k_summary=5"])[0]
    import pandas as pd
    assert len(pd.read_csv(f / "metrics.csv")) == 100
