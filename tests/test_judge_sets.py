"""The four hand-labelled judge sets in data/judge_meta: `cases.jsonl` (the tuning set), `frozen_cases.jsonl` (the held-out
set), `frozen2_cases.jsonl` (the second held-out set) and `frozen3_cases.jsonl` (the third held-out set). Each loads and
carries 12 rows of each of the nine kinds with the kind's label; no two share an id, a question or a copied_example string;
all quote their questions, references and statements unchanged from WildGraphBench; and the held-out files still have the
checksums their README states."""
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import need_real_data

from fanin.judging.agreement import load_cases

ROOT = Path(__file__).resolve().parents[1]
META = ROOT / "data" / "judge_meta"
TUNING, FROZEN, FROZEN2 = META / "cases.jsonl", META / "frozen_cases.jsonl", META / "frozen2_cases.jsonl"
FROZEN3 = META / "frozen3_cases.jsonl"
KIND_LABEL = {"correct": 1, "paraphrase": 1, "padded": 1, "partial": 0, "wrong": 0, "empty": 0,
              "repeat_question": 0, "refusal": 0, "copied_example": 0}
PREFIX = {"single-fact": "sf", "multi-fact": "mf", "summary": "sum"}
DATA_QTYPE = {"single-fact": "single-fact", "multi_fact": "multi-fact", "summary": "summary"}   # the data spells it multi_fact
FROZEN_DOMAINS = {"single-fact": ["health", "people", "human_activities", "philosophy"],
                  "multi-fact": ["technology", "religion", "society", "history"],
                  "summary": ["culture", "geography", "nature", "mathematics"]}
FROZEN2_DOMAINS = {"single-fact": ["religion", "society", "history", "nature"],
                   "multi-fact": ["culture", "geography", "mathematics", "technology"],
                   "summary": ["health", "people", "human_activities", "philosophy"]}
# nature has no multi-fact question, so in frozen2 it repeats its tuning type and technology repeats its frozen type
FROZEN2_REPEATS = {"nature": "tuning", "technology": "frozen"}
# every domain has given all its types by then, so frozen3 repeats the tuning set's layout (nature has no multi-fact
# question, and the only multi-fact questions of mathematics and history are taken)
FROZEN3_DOMAINS = {"single-fact": ["culture", "geography", "nature", "mathematics"],
                   "multi-fact": ["health", "people", "human_activities", "philosophy"],
                   "summary": ["technology", "religion", "society", "history"]}
ID_LEAD = {"tuning": "", "frozen": "fz-", "frozen2": "f2-", "frozen3": "f3-"}


@pytest.fixture(scope="module")
def sets():
    return {"tuning": load_cases(TUNING), "frozen": load_cases(FROZEN), "frozen2": load_cases(FROZEN2),
            "frozen3": load_cases(FROZEN3)}


def questions(rows):
    "question -> (qtype, question number from the id), in id order."
    out = {}
    for r in rows:
        n = int(r["id"].split("-")[-2])
        out.setdefault(r["question"], (r["qtype"], n))
    return out


def test_each_set_has_twelve_rows_of_each_kind_with_the_kinds_label(sets):
    for name, rows in sets.items():
        assert len(rows) == 108, name
        assert Counter(r["kind"] for r in rows) == {k: 12 for k in KIND_LABEL}, name
        assert Counter(r["qtype"] for r in rows) == {q: 36 for q in PREFIX}, name
        assert Counter(r["label"] for r in rows) == {1: 36, 0: 72}, name
        bad = [r["id"] for r in rows if r["label"] != KIND_LABEL[r["kind"]]]
        assert not bad, f"{name}: label does not follow the kind in {bad}"
        assert all(r["note"].strip() for r in rows), f"{name}: every row says why its label is what it is"


def test_ids_follow_the_pattern_and_each_question_has_nine_kinds(sets):
    for name, rows in sets.items():
        lead = ID_LEAD[name]
        ids = [r["id"] for r in rows]
        assert len(set(ids)) == len(ids), f"{name}: duplicate ids"
        by_question = {}
        for r in rows:
            assert r["id"] == f"{lead}{PREFIX[r['qtype']]}-{r['id'].split('-')[-2]}-{r['kind']}", r["id"]
            by_question.setdefault(r["id"].rsplit("-", 1)[0], []).append(r)
        assert sorted(by_question) == sorted(f"{lead}{p}-{n}" for p in PREFIX.values() for n in range(1, 5)), name
        for key, group in by_question.items():
            assert {r["kind"] for r in group} == set(KIND_LABEL), key
            assert len({(r["question"], r["reference"], tuple(r["statements"])) for r in group}) == 1, f"{key}: one question per id"


def test_the_sets_share_no_id_no_question_and_no_placeholder(sets):
    copied = lambda rows: {r["answer"].strip().lower() for r in rows if r["kind"] == "copied_example"}
    for name, rows in sets.items():
        assert len(copied(rows)) == 12, f"{name}: twelve different copied_example strings"
    names = list(sets)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ra, rb = sets[a], sets[b]
            assert not {r["id"] for r in ra} & {r["id"] for r in rb}, (a, b)
            assert not set(questions(ra)) & set(questions(rb)), (a, b)
            assert not copied(ra) & copied(rb), (a, b)


def test_questions_references_and_statements_are_quoted_from_wildgraphbench(sets):
    from fanin.data.wildgraphbench import default_root
    qa = default_root() / "QA"
    if not qa.is_dir():
        need_real_data(qa, "the WildGraphBench QA files")
    source = {}   # question -> (domain, data row)
    for path in sorted(qa.glob("*/questions.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                source[row["question"]] = (path.parent.name, row)
    domains = {}
    for name, rows in sets.items():
        for r in rows:
            assert r["question"] in source, f"{name} {r['id']}: question not in {qa}"
            domain, row = source[r["question"]]
            assert DATA_QTYPE[row["question_type"][0]] == r["qtype"], r["id"]
            if r["qtype"] == "summary":
                assert r["statements"] == row["gold_statements"], f"{r['id']}: statements are the row's gold_statements"
                assert r["reference"] == " ".join(row["gold_statements"]), r["id"]
            else:
                assert r["statements"] == [] and r["reference"] == row["answer"], f"{r['id']}: reference is the row's answer"
        domains[name] = {q: (domain_of, qtype, n) for q, (qtype, n) in questions(rows).items()
                         for domain_of in [source[q][0]]}
    for name in sets:   # one question per domain in each set, all 12 domains
        assert sorted(d for d, _, _ in domains[name].values()) == sorted(p.parent.name for p in qa.glob("*/questions.jsonl"))
    for name, expected in [("frozen", FROZEN_DOMAINS), ("frozen2", FROZEN2_DOMAINS), ("frozen3", FROZEN3_DOMAINS)]:
        placed = {(qtype, n): d for d, qtype, n in domains[name].values()}
        assert placed == {(q, i + 1): d for q, ds in expected.items() for i, d in enumerate(ds)}, name
    type_in = {name: {d: qtype for d, qtype, _ in domains[name].values()} for name in sets}
    assert all(type_in["tuning"][d] != qtype for d, qtype in type_in["frozen"].items()), "each domain gives the frozen set another type"
    repeats = {d: earlier for d, qtype in type_in["frozen2"].items() for earlier in ("tuning", "frozen")
               if type_in[earlier][d] == qtype}
    assert repeats == FROZEN2_REPEATS, "frozen2 gives every other domain a type neither earlier set used for it"
    assert type_in["frozen3"] == type_in["tuning"], "frozen3 gives each domain the type it gives in the tuning set"


@pytest.mark.parametrize("path", [FROZEN, FROZEN2, FROZEN3], ids=lambda p: p.name)
def test_frozen_sets_match_the_checksums_in_their_readme(path):
    readme = (META / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"\b([0-9a-f]{64})\s+data/judge_meta/" + re.escape(path.name) + r"\b", readme)
    assert len(stated) == 1, f"the README states {path.name}'s sha256 once"
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    assert actual == stated[0], (f"data/judge_meta/{path.name} differs from the checksum in data/judge_meta/README.md: "
                                 "a held-out set is frozen; write a new file instead of editing it")


SWAP_SETS = {"frozen4": ["culture", "geography", "nature", "mathematics"], "frozen5": ["health", "people", "human_activities", "philosophy"],
             "frozen6": ["technology", "religion", "society", "history"]}
SWAP_KIND_LABEL = {"correct": 1, "paraphrase": 1, "numbers_in_words": 1, "reordered": 1, "omits_incidental": 1,
                   "swap_entity": 0, "swap_date": 0, "swap_quantity": 0, "partial": 0, "wrong": 0}


def test_the_swap_sets_have_ten_kinds_of_ten_rows_from_their_domains():
    """frozen4-6: 100 rows each, 10 of each kind with its label, ids f<N>-<sf|mf|sum>-<n>-<kind>, 4 single-fact, 4 multi-fact
    and 2 summary questions, none shared with another set; quoted unchanged from WildGraphBench's QA files of their domains."""
    seen = {r["question"] for p in (TUNING, FROZEN, FROZEN2, FROZEN3) for r in load_cases(p)}
    qa = ROOT.parent / "shared" / "data" / "wildgraphbench" / "QA"
    for name, domains in SWAP_SETS.items():
        rows = load_cases(META / f"{name}_cases.jsonl")
        assert len(rows) == 100 and Counter(r["kind"] for r in rows) == {k: 10 for k in SWAP_KIND_LABEL}, name
        assert all(r["label"] == SWAP_KIND_LABEL[r["kind"]] for r in rows), name
        assert len({r["id"] for r in rows}) == 100 and all(r["id"] == f"f{name[-1]}-{PREFIX[r['qtype']]}-{r['id'].split('-')[2]}-{r['kind']}"
                                                              for r in rows), name
        assert Counter(q for q, _ in questions(rows).values()) == {"single-fact": 4, "multi-fact": 4, "summary": 2}, name
        assert not {r["question"] for r in rows} & seen, f"{name} reuses a question of another set"
        seen |= {r["question"] for r in rows}
        if not qa.is_dir(): continue
        source = {json.loads(l)["question"]: (d, json.loads(l)) for d in domains
                  for l in (qa / d / "questions.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()}
        for r in rows:
            assert r["question"] in source, f"{name} {r['id']}: not a question of {domains}"
            row = source[r["question"]][1]
            assert r["reference"] == (" ".join(row["gold_statements"]) if r["qtype"] == "summary" else row["answer"]), r["id"]


@pytest.mark.parametrize("name", sorted(SWAP_SETS))
def test_the_swap_sets_match_their_checksums(name):
    test_frozen_sets_match_the_checksums_in_their_readme(META / f"{name}_cases.jsonl")
