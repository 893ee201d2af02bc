"""The LLM evidence judge sees the whole pack: a pack over the judge model's budget is judged in pieces (one call each, the
same prompt and cache), the verdicts combine (covered when some piece covers), and every judgment records the share of the
pack it saw, with the cap when one applies. Run against the loopback stand-in endpoint."""
import json
import re

import pytest

from fanin.judging.evidence import DocumentEvidenceJudge, LLMEvidenceJudge, QuoteEvidenceJudge
from fanin.models.llm import LLM
from fanin.core.schema import Instance, Pack, Unit
from openai_standin import StandIn

KEY = "the harbour froze in the winter of 1921"
FILLER = ("Unit {i} describes the island's fishing fleet, the prices at the market, the ferry timetable, the school and the "
          "weather of an ordinary year in some detail, with the names of the boats and of the families who owned them.")


def _reply(body):
    user = body["messages"][-1]["content"]
    if "Retrieved pack:" in user:   # ER: is the gold passage's key information in this (piece of the) pack?
        return json.dumps({"reason": "stand-in", "covered": KEY in user.split("Retrieved pack:", 1)[1].lower()})
    if "Segment:" in user:          # EP: does this segment carry a gold passage?
        return json.dumps({"reason": "stand-in", "supports": KEY in user.split("Segment:", 1)[1].lower()})
    return json.dumps({"ok": True})  # the LLM layer's own checks


def _inst():
    return Instance(id="q", dataset="t", query="When did the harbour freeze?", qtype="single-doc", fan_in=1, gold_docs=["d"],
                    gold_quotes=[{"doc_id": "d", "quote": "The harbour froze in the winter of 1921."}])


def _pack(n=20):
    "n units of filler, the gold sentence in the last one: only the pack's end carries the evidence."
    texts = [FILLER.format(i=i) for i in range(1, n)] + ["In the end " + KEY + ", and fishermen walked to the island."]
    return Pack(instance_id="q", system="bm25", units=[Unit(doc_id="d", text=t, score=1, rank=r) for r, t in enumerate(texts, 1)])


@pytest.fixture()
def standin():
    with StandIn(model="judge-s", reply=_reply) as s:
        yield s


def _llm(s, tmp_path, **kw):
    return LLM(provider="vllm", base_url=s.base_url, model=s.model, cache_path=tmp_path / "llm.sqlite", max_tokens=48, **kw)


def _er_calls(s): return [r for r in s.chats() if "Retrieved pack:" in r["messages"][-1]["content"]]


def test_a_pack_over_the_budget_is_judged_in_pieces_and_seen_whole(standin, tmp_path):
    llm = _llm(standin, tmp_path, context_tokens=600)
    judge = LLMEvidenceJudge(max_tokens=48)
    pack = _pack()
    j = judge.judge(pack, _inst(), llm)
    assert j.status == "ok" and j.pieces >= 3 and j.pieces_cut == 0
    assert j.share_seen == 1.0 and j.chars_seen == j.chars_total and j.segments_seen == j.n_segments == len(pack.units)
    # the gold sentence is in the last piece: every piece was asked, the last one covered it
    assert j.er == 1.0 and j.gold[0] == {"unit": 0, "covered": True, "pieces_judged": j.pieces, "piece": j.pieces - 1}
    calls = _er_calls(standin)
    assert len(calls) == j.pieces
    shown = [int(i) for c in calls for i in re.findall(r"^\[(\d+)\] ", c["messages"][-1]["content"], re.M)]
    assert sorted(shown) == list(range(1, len(pack.units) + 1))     # every segment shown once, numbered by its place in the pack
    for c in calls:   # each call within the model's context
        assert sum(llm.count_tokens(m["content"]) + 4 for m in c["messages"]) <= 600 - 48
    assert j.ep == 1 / len(pack.units)                               # EP: one call per segment, as before
    # the same judgment replays from the one LLM cache: no server call
    n = len(standin.chats())
    again = judge.judge(pack, _inst(), _llm(standin, tmp_path, context_tokens=600))
    assert again == j and len(standin.chats()) == n


def test_a_pack_that_fits_is_one_piece(standin, tmp_path):
    j = LLMEvidenceJudge(max_tokens=48).judge(_pack(2), _inst(), _llm(standin, tmp_path, context_tokens=8192))
    assert (j.pieces, j.share_seen, j.er) == (1, 1.0, 1.0) and len(_er_calls(standin)) == 1


def test_a_cap_is_applied_and_recorded(standin, tmp_path):
    llm = _llm(standin, tmp_path, context_tokens=600)
    j = LLMEvidenceJudge(max_tokens=48, max_pieces=1).judge(_pack(), _inst(), llm)
    assert j.pieces == 1 and j.pieces_cut >= 2 and j.share_seen < 0.5 and j.segments_seen < j.n_segments
    assert j.er == 0.0 and j.gold[0]["pieces_judged"] == 1          # the evidence was in a piece the cap never showed
    assert len(_er_calls(standin)) == 1
    t = LLMEvidenceJudge(max_tokens=48, pack_tokens=150).judge(_pack(), _inst(), _llm(standin, tmp_path, context_tokens=600))
    assert t.share_seen == 1.0 and t.pieces > 3 and t.er == 1.0     # a smaller budget: more pieces, still the whole pack


def test_an_unknown_context_window_fails_with_what_to_set(standin, tmp_path):
    j = LLMEvidenceJudge(max_tokens=48).judge(_pack(), _inst(), _llm(standin, tmp_path))
    assert j.status == "failed" and j.er is None and "context_tokens" in j.error and "pack_tokens" in j.error
    ok = LLMEvidenceJudge(max_tokens=48, pack_tokens=200).judge(_pack(), _inst(), _llm(standin, tmp_path))
    assert ok.status == "ok" and ok.share_seen == 1.0 and ok.er == 1.0


def test_the_judge_setting_names_its_budget_not_a_character_cut():
    s = LLMEvidenceJudge(max_pieces=4).setting()
    assert s["max_pieces"] == 4 and s["pack_tokens"] is None and "pack_chars" not in s


def test_deterministic_judges_record_what_they_saw():
    j = QuoteEvidenceJudge().judge(_pack(), _inst())
    assert j.share_seen == 1.0 and j.segments_seen == j.n_segments and j.er == 1.0
    capped = DocumentEvidenceJudge(max_segments=4).judge(_pack(), _inst())
    assert capped.segments_seen == 4 and capped.segments_cut == 16 and 0.15 < capped.share_seen < 0.25
    empty = DocumentEvidenceJudge().judge(Pack(instance_id="q", system="s", units=[]), _inst())
    assert empty.share_seen == 1.0 and empty.chars_total == 0
