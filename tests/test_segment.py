"Canonical segmentation (AuthTrace App. K.2): exact outputs on hand-worked texts and invariants on real pages."
import json
import subprocess
import sys


from fanin.core.segment import TOKEN_RE, clean, count_tokens, segment_text, segment_units
from fanin.core.schema import Unit


def words(n, prefix="w"):
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_token_count_cjk_latin_mixed():
    assert count_tokens("GPT-4o 在 2024 年发布") == 7
    assert count_tokens("café naïve") == 2 and count_tokens("…!?") == 0 and count_tokens("") == 0


def test_clean_quotes_whitespace_paragraphs():
    assert clean("\u201cQuoted\u201d  text\r\n\n  next\t\tline ") == '"Quoted" text\nnext line'


def test_short_english_one_segment():
    (s,) = segment_text("Alpha beta gamma. Delta epsilon!")
    assert (s.text, s.tokens) == ("Alpha beta gamma. Delta epsilon!", 5)


def test_chinese_and_mixed():
    (s,) = segment_text("甲乙丙。丁戊！")
    assert (s.text, s.tokens) == ("甲乙丙。丁戊！", 5)
    (m,) = segment_text("GPT-4o 是模型。It works well. 好！")
    assert m.tokens == 9


def test_empty_and_punctuation_only():
    assert segment_text("") == [] and segment_text("   \n\n ") == [] and segment_text("!!! ... ???") == []


def test_hard_split_of_one_long_sentence():
    assert [s.tokens for s in segment_text(words(400))] == [180, 180, 40]
    # the trailing 30-token piece cannot join the 180 before it (210 > 180): it stays, the only short segment
    assert [s.tokens for s in segment_text(words(390))] == [180, 180, 30]


def test_greedy_merge_toward_target():
    text = " ".join(words(49, f"s{k}x") + "." for k in range(5))  # five sentences of 49 tokens
    sents = [count_tokens(x) for x in text.split(". ")]
    assert all(n == 49 for n in sents)
    # 49+49 = 98 < 120 -> add; 147 >= 120 -> close; then 49+49 = 98 at the end
    assert [s.tokens for s in segment_text(text)] == [147, 98]


def test_trailing_segment_merge():
    text = words(130, "a") + ". " + words(30, "b") + "."
    assert [s.tokens for s in segment_text(text)] == [160]


def test_duplicates_removed_within_text_and_pack():
    t = words(130, "a") + ".\n" + words(130, "a") + ".\n" + words(50, "c") + "."
    segs = segment_text(t)
    assert len({s.text for s in segs}) == len(segs) == 2
    units = [Unit(doc_id="d1", text=t, score=1, rank=1), Unit(doc_id="d2", text=t, score=1, rank=2)]
    out, info = segment_units(units)
    assert len(out) == 2 and info["duplicates_removed"] == 2 and {s.doc_id for s in out} == {"d1"}


def test_cap_is_reported():
    t = "\n".join(words(130, f"p{i}x") + "." for i in range(30))
    out, info = segment_units([Unit(doc_id="d", text=t, score=1, rank=1)], max_segments=10)
    assert len(out) == 10 and info["segments_cut"] == 20


def test_invariants_on_real_pages(real_data_root):
    from fanin.data.wildgraphbench import WildGraphBench
    docs = list(WildGraphBench(real_data_root, domains=["mathematics"]).corpus("mathematics"))[:60]
    for d in docs:
        segs = segment_text(d.text)
        assert all(s.tokens <= 180 for s in segs)
        short = [i for i, s in enumerate(segs) if s.tokens < 40]
        assert all(segs[i].forced or i == len(segs) - 1 for i in short), d.id
        assert len({s.text for s in segs}) == len(segs)
        # order and content preserved up to whitespace: every segment occurs in the cleaned text, in order, and the
        # segments' tokens are the text's tokens (fewer only when an exact duplicate segment was removed)
        flat, pos = clean(d.text).replace("\n", " "), 0
        for s in segs:
            pos = flat.find(s.text, pos)
            assert pos >= 0, d.id
            pos += len(s.text)
        got = [t for s in segs for t in TOKEN_RE.findall(s.text)]
        want = TOKEN_RE.findall(clean(d.text))
        assert got == want or len(got) < len(want), d.id


def test_cli_segment(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("甲乙丙。丁戊！\nAlpha beta.", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "segment", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert rows == [{"text": "甲乙丙。丁戊! Alpha beta.".replace("!", "！"), "tokens": 7}]
    bad = subprocess.run([sys.executable, "-m", "fanin.doors.cli", "segment", str(tmp_path / "missing.txt")], capture_output=True, text=True)
    assert bad.returncode != 0 and "no such file" in bad.stderr
