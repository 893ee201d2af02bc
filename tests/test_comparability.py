"A reported-vs-lab comparison is comparable only when the same quantity is measured the same way: the corpus-token row is not."
from fanin.results.paper_comparisons import compare, comparison_specs
from fanin.results.papers import load_reported


def test_corpus_tokens_are_not_comparable_and_say_why(tmp_path):
    spec = comparison_specs()["wildgraphbench_table4_tokens"]
    assert spec["comparable"] is False
    assert all(w in spec["reason"] for w in ("tokenizer", "18x", "43.2M", "Comparable once"))
    lab = tmp_path / "corpus_tokens.csv"   # the lab's counts as the reproduction stage writes them (millions of tokens)
    lab.write_text("# setting: all 12 domains\nmethod,setting,encoding,text,documents,characters,tokens\n"
                   "Ours,pipeline=lightrag,o200k_base,raw,3893,154583280,43.18\nOurs,pipeline=lightrag,o200k_base,clean,3893,92236660,22.23\n"
                   "Ours,pipeline=lightrag,cl100k_base,raw,3893,154583280,43.56\nOurs,pipeline=lightrag,cl100k_base,clean,3893,92236660,22.58\n")
    cells, _ = compare({**spec, "lab_table": str(lab)}, load_reported(), "wildgraphbench_table4_tokens")
    assert len(cells) == 4 and (cells.reported == 2.4).all() and not cells.comparable.any()
    assert cells.set_index("lab_system").loc["o200k_base/raw", "lab"] / 2.4 > 17
