"Evidence judges over canonical segments on hand-made packs, and the AuthTrace-format loader / validator."
import json
import shutil

import pytest

from conftest import ROOT
from fanin.data.authtrace_format import AuthTraceFormat
from fanin.judging.evidence import DocumentEvidenceJudge, QuoteEvidenceJudge, overlap_spans
from fanin.core.schema import Instance, Pack, RecordError, Unit

FIX = ROOT / "tests" / "fixtures" / "authtrace_tiny"
QUOTE = "Fishermen walked across the ice to the island."


def _inst(quotes=None, docs=("d",)):
    quotes = quotes or [{"doc_id": "d", "quote": QUOTE}]
    return Instance(id="q", dataset="t", query="What happened?", qtype="single-doc", fan_in=len(set(docs)),
                    gold_docs=list(docs), gold_quotes=quotes)


def _pack(*texts, doc="d"):
    return Pack(instance_id="q", system="s", units=[Unit(doc_id=doc, text=t, score=1, rank=i + 1) for i, t in enumerate(texts)])


def test_quote_inside_a_longer_segment_is_covered_and_supporting():
    j = QuoteEvidenceJudge().judge(_pack("The harbour froze in 1921. " + QUOTE + " Then spring came."), _inst())
    assert j.er == 1 and j.ep == 1 and j.gold[0]["contained"]


def test_quote_split_across_two_segments_is_covered():
    j = QuoteEvidenceJudge().judge(_pack("Fishermen walked across the", "the ice to the island. They rested."), _inst())
    assert j.gold[0]["covered"] and not j.gold[0]["contained"] and j.er == 1


def test_paraphrase_is_not_matched_by_the_deterministic_judge():
    j = QuoteEvidenceJudge().judge(_pack("People on boats crossed the frozen water on foot."), _inst())
    assert j.er == 0 and j.ep == 0


def test_same_text_from_another_document_does_not_count():
    j = QuoteEvidenceJudge().judge(_pack(QUOTE, doc="other"), _inst())
    assert j.er == 0 and j.ep == 0


def test_ep_counts_segments():
    far = " ".join(f"filler{i}" for i in range(150)) + "."
    j = QuoteEvidenceJudge().judge(_pack(QUOTE, far), _inst())
    assert j.n_segments == 2 and j.er == 1 and j.ep == 0.5
    assert [s["supporting"] for s in j.segments] == [True, False]


def test_document_judge_and_empty_pack():
    inst = _inst(docs=("d", "e"))
    j = DocumentEvidenceJudge().judge(_pack("some text here.", doc="d"), inst)
    assert j.er == 0.5 and j.ep == 1
    empty = DocumentEvidenceJudge().judge(Pack(instance_id="q", system="s", units=[]), inst)
    assert empty.er == 0 and empty.ep is None  # precision of nothing is undefined, not 0


def test_overlap_ignores_short_common_blocks():
    assert overlap_spans("the cat sat on the mat", "a dog sat on a log", min_block=20) == []


def test_fixture_loads_and_validates():
    ds = AuthTraceFormat(FIX)
    assert ds.validate().empty
    insts = ds.instances()
    assert [i.fan_in for i in insts] == [1, 2, 2, 2, 3] and ds.domains == ["Mara Lind", "Tomas Varga"]
    j = QuoteEvidenceJudge().judge(Pack(instance_id=insts[0].id, system="oracle",
                                        units=[Unit(doc_id=d.id, text=d.text, score=1, rank=1) for d in ds.corpus("Mara Lind")
                                               if d.id in insts[0].gold_docs]), insts[0])
    assert j.er == 1


def _copy_with(tmp_path, edit):
    d = tmp_path / "ds"
    shutil.copytree(FIX, d)
    lines = (d / "instances.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1]); edit(rec); lines[1] = json.dumps(rec)
    (d / "instances.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def test_validator_rejects_a_quote_not_in_its_document(tmp_path):
    d = _copy_with(tmp_path, lambda r: r["gold_evidence_units"][0].update(quote="The council built a tunnel instead."))
    rep = AuthTraceFormat(d).validate()
    assert len(rep) == 1 and rep.iloc[0].severity == "error" and rep.iloc[0].line == 2
    assert rep.iloc[0].field == "gold_evidence_units[0].quote"
    with pytest.raises(RecordError) as e:
        AuthTraceFormat(d).instances()
    assert "instances.jsonl" in str(e.value) and "line 2" in str(e.value) and "does not occur" in str(e.value)


def test_fan_in_mismatch_is_reported_not_silently_fixed(tmp_path):
    d = _copy_with(tmp_path, lambda r: r.update(fan_in=3))
    ds = AuthTraceFormat(d)
    rep = ds.validate()
    assert list(rep.severity) == ["warning"] and "spans 2 documents" in rep.iloc[0].problem
    inst = [i for i in ds.instances() if i.id == "ml-002"][0]
    assert inst.fan_in == 2 and inst.meta["declared_fan_in"] == 3


def test_a_summary_units_segments_belong_to_the_documents_they_carry(tiny_overrides):
    """The pipeline gives the evidence judges the corpus: a summary unit (citing several documents) earns, segment by segment,
    only the documents whose wording it carries; without the corpus a judge keeps the unit's own document."""
    from fanin.core.config import compose
    from fanin.run.pipeline import load_dataset
    from fanin.core.schema import Unit
    ds = load_dataset(compose(tiny_overrides))
    inst = next(i for i in ds.instances() if len(i.gold_docs) >= 2)
    corpus = ds.corpus(inst.domain)
    a, b = inst.gold_docs[:2]
    words = corpus[a].text.split()
    summary = Unit(doc_id=a, text=" ".join(words[: min(60, len(words))]), score=1.0, rank=1, meta={"doc_ids": [a, b]})
    pack = Pack(instance_id=inst.id, system="raptor", units=[summary])
    carried = DocumentEvidenceJudge().judge(pack, inst, texts=corpus)
    assert {s["doc_id"] for s in carried.segments} == {a}
    assert carried.er == 1 / len(set(inst.gold_docs))
