"""Document-level windows: each page is windowed once, so the text two overlapping chunks share is embedded once;
every window is owned by a chunk that holds its middle; the chunk-level windows are unchanged (the default's numbers stay)."""
import pytest

from fanin.run.components import load_dataset, make_system
from fanin.core.config import compose, repo_root
from fanin.systems.flat import chunk_corpus

FIXTURE = repo_root() / "tests" / "fixtures" / "wildgraphbench_tiny"


def _windows(name, **over):
    ov = [f"system={name}", f"dataset.root={FIXTURE}", "dataset.domains=[nature]", "system.chunk_tokens=20", "system.chunk_overlap=8",
          "system.window_tokens=6"] + [f"+system.{k}={v}" for k, v in over.items()]
    cfg = compose(ov)
    s = make_system(cfg)
    s.corpus = load_dataset(cfg).corpus("nature")
    s.chunks = chunk_corpus(s.corpus, s.chunk_tokens, s.chunk_overlap)
    return s, *s._windows()


@pytest.mark.filterwarnings("ignore:WildGraphBench")
def test_document_windows_embed_shared_text_once_and_belong_to_their_chunk():
    s, texts, owner = _windows("dense_docwin")
    _, ctexts, cowner = _windows("dense")
    assert len(texts) < len(ctexts) and sum(map(len, texts)) < sum(map(len, ctexts)), "the chunks' overlap is no longer embedded twice"
    for t, o in zip(texts, owner):
        c = s.chunks[o]
        doc = s.corpus[c.doc_id].text
        a = doc.find(t, max(0, c.start - len(t)))
        assert a >= 0 and c.start <= a + len(t) // 2 <= c.end + 1, "a window is owned by the chunk holding its middle"
    assert set(cowner.tolist()) == set(range(len(s.chunks))), "chunk windows: every chunk has its own"


def test_windows_must_be_chunk_or_document():
    with pytest.raises(Exception, match="system.windows='page'"):
        _windows("dense", windows="page")
