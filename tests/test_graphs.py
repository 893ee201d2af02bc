"""Entity-graph systems: the shared spaCy parse, GRAAL's Algorithm 2 on a hand-drawn graph, Table 1's overall score,
PPR against networkx and on a bridge-passage fixture, and a resumed LLM-built index (real embedded server)."""
import json

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from fanin.systems.graphs import CoMentionGraph, EntityGraphSystem, between_vertices, claim_evidence, graal_overall, graal_table1, path2_sentences
from fanin.models.nlp import normalize_entity, parse_corpus
from fanin.systems.ppr import PPRSystem, personalized_pagerank, transition_matrix
from fanin.core.schema import Corpus, Document, Instance

TOY = Corpus("toy", [
    Document(id="lennon", title="John Lennon", text="John Lennon was born in Liverpool. Lennon wrote songs with Paul McCartney."),
    Document(id="liverpool", title="Liverpool", text="Liverpool is a city in England. Liverpool lies on the River Mersey."),
    Document(id="other", title="Other", text="Paris is the capital of France, and Berlin is the capital of Germany."),
])


def test_normalisation_and_alias_rule():
    assert normalize_entity("The Beatles'") == "beatles" and normalize_entity("_Ant-Man_") == "ant man"
    p = parse_corpus(TOY)
    assert "john lennon" in p.entities and "lennon" not in p.entities  # one-word PERSON -> the document's full name
    assert p.sentences_of_doc("liverpool") == range(2, 4)


def test_frames_split_coordinated_clauses_but_sentences_do_not():
    p = parse_corpus(TOY)
    name = lambda es: {p.entities[e] for e in es}
    assert any({"paris", "berlin"} <= name(es) for _, es in p.sentence_groups)
    assert not any({"paris", "berlin"} <= name(es) for _, es in p.frame_groups)
    assert any(name(es) == {"paris", "france"} for _, es in p.frame_groups)


def test_algorithm2_on_the_papers_example_graph():
    # Beatles(0) - Liverpool(1) - England(2); Beatles - Ringo(3); Liverpool - Mersey(4); England - London(5); London - Ringo
    edges = {(0, 1): [10], (1, 2): [11], (0, 3): [12], (1, 4): [13], (2, 5): [14], (3, 5): [15], (4, 5): [16]}
    adj = {}
    for (u, v), ss in edges.items():
        adj.setdefault(u, {})[v] = ss; adj.setdefault(v, {})[u] = ss
    g = CoMentionGraph(6, adj, "frame")
    assert between_vertices(g, [0, 2]) == {1}  # Liverpool joins the two mentioned vertices; London only touches England
    assert path2_sentences(g, [0, 2]) == {10, 11}
    assert path2_sentences(g, [0]) == set()  # one mentioned entity: no path of length <= 2
    # the literal pseudo-code also takes edges between two between vertices (Ringo - London here)
    assert between_vertices(g, [0, 2, 4]) == {1, 5} and path2_sentences(g, [0, 2, 4]) == {10, 11, 13, 14, 16}
    assert path2_sentences(g, [0, 2, 4], "induced") == {10, 11, 13, 14, 16}
    with pytest.raises(ValueError): path2_sentences(g, [0], "steiner")


def test_induced_reading_adds_between_between_edges():
    # mentioned a(0), b(1); between x(2), y(3) (each adjacent to both); x - y co-mentioned in sentence 99
    adj = {}
    for (u, v), s in {(0, 2): 1, (1, 2): 2, (0, 3): 3, (1, 3): 4, (2, 3): 99}.items():
        adj.setdefault(u, {})[v] = [s]; adj.setdefault(v, {})[u] = [s]
    g = CoMentionGraph(4, adj, "sentence")
    assert path2_sentences(g, [0, 1]) == {1, 2, 3, 4}
    assert path2_sentences(g, [0, 1], "induced") == {1, 2, 3, 4, 99}


def test_graal_system_retrieves_the_bridge_and_reports_graph_stats():
    s = EntityGraphSystem(method="graal").index(TOY)
    sents, v1 = s.candidate_sentences("John Lennon was born in England.")
    assert [s.parsed.entities[e] for e in v1] == ["john lennon", "england"]
    assert [s.parsed.sentence_text(TOY, x) for x in sents] == [
        "John Lennon was born in Liverpool.", "Lennon wrote songs with Paul McCartney.", "Liverpool is a city in England."]
    units = s.retrieve("Was John Lennon born in England?", 5)
    assert [u.doc_id for u in units] == ["lennon", "liverpool"] and units[0].meta["n_sentences"] == 2
    g = s.stats()["graph"]
    assert g["nodes"] == len(s.parsed.entities) and 0 <= g["isolated_share"] <= 1
    assert abs(g["organization"] + g["isolated_share"] - 1) < 1e-12
    em = EntityGraphSystem(name="entity_mention", method="entity_mention").index(TOY)
    em_s, _ = em.candidate_sentences("John Lennon was born in England.")
    assert set(sents) - set(em_s) == set() and len(em_s) >= len(sents)


def test_table1_layout_and_overall():
    assert abs(graal_overall(0.702, 116.3) - 0.773) < 1e-3  # GRAAL's own row of Table 1
    assert abs(graal_overall(0.789, 341.2) - 0.427) < 1e-3  # Entity + Mention
    inst = [Instance(id="q1", dataset="toy", query="q", qtype="multi-fact", answer="John Lennon was born in England.",
                     gold_docs=["lennon", "liverpool"], fan_in=2),
            Instance(id="q2", dataset="toy", query="q", qtype="multi-fact", answer="Paris and Berlin are capitals.",
                     gold_docs=["other", "liverpool"], fan_in=2)]
    frames = [claim_evidence(EntityGraphSystem(name=m, method=m).index(TOY), inst) for m in ("entity_mention", "graph_retrieve", "graal")]
    t = graal_table1(pd.concat(frames))
    assert list(t.columns[:5]) == ["method", "avg_sentences", "avg_documents", "hit_rate", "overall"]
    assert list(t.method) == ["entity_mention", "graph_retrieve", "graal"]
    assert (t.hit_rate == 0.5).all()  # q1 is covered through Liverpool; q2's gold includes a page no path reaches


def test_ppr_matches_networkx_pagerank():
    g = nx.Graph()
    g.add_weighted_edges_from([(0, 1, 2.0), (1, 2, 1.0), (2, 3, 1.0), (0, 3, 1.0), (3, 4, 3.0)])
    g.add_node(5)  # a dangling node
    seed = np.array([0.5, 0, 0, 0, 0, 0.5])
    T, dangling = transition_matrix(nx.to_scipy_sparse_array(g, nodelist=list(range(6)), weight="weight"))
    ours = personalized_pagerank(T, seed, dangling, alpha=0.5, tol=1e-10)
    ref = nx.pagerank(g, alpha=0.5, personalization={i: float(w) for i, w in enumerate(seed)}, tol=1e-10)
    assert np.allclose(ours, [ref[i] for i in range(6)], atol=1e-8)


def test_ppr_ranks_the_bridge_passage_above_a_distractor():
    corpus = Corpus("toy", [
        Document(id="a_lennon", text="John Lennon was born in Liverpool. John Lennon wrote songs with Paul McCartney."),
        Document(id="b_liverpool", text="Liverpool is a city in England. Liverpool lies on the River Mersey."),
        Document(id="c_distractor", text="Was anyone born in a city? Songs were written and people were born in a city."),
        Document(id="d_other", text="Paris is the capital of France, and Berlin is the capital of Germany."),
    ])
    ppr = PPRSystem(chunk_tokens=50, chunk_overlap=0).index(corpus)
    ranked = [u.doc_id for u in ppr.retrieve("Was John Lennon born in a city of England?", 4)]
    assert ranked[:2] == ["a_lennon", "b_liverpool"] and ranked.index("b_liverpool") < ranked.index("c_distractor")


def test_graph_systems_run_through_the_pipeline(tiny_overrides):
    from fanin.run.pipeline import run
    for name in ("graal", "ppr"):
        (folder,) = run(tiny_overrides + [f"system={name}", "system.n_process=1"])
        man = json.loads((folder / "manifest.json").read_text())
        assert man["summary"]["questions"] > 0 and man["summary"]["failed"] == 0
        assert "graph" in man["index"]["nature"]


def test_interrupted_llm_index_build_resumes_from_the_cache(tmp_path):
    """ppr in llm mode: the build is killed after two OpenIE calls; the rebuild replays those two from the cache and calls only for the rest."""
    from fanin.models.llm import LLM
    from fanin.models.local_models import EmbeddedServer
    corpus = Corpus("toy", [Document(id=f"d{i}", text=t) for i, t in enumerate([
        "John Lennon was born in Liverpool.", "Liverpool is a city in England.", "Paris is the capital of France.",
        "Berlin is the capital of Germany.", "Paul McCartney wrote songs with John Lennon."])])
    with EmbeddedServer(n_ctx=2048) as server:
        def llm():
            return LLM(provider="embedded", model=server.model_name, base_url=server.base_url, cache_path=tmp_path / "llm.sqlite",
                       structured="json_object_schema", max_tokens=96)
        first = llm()
        real, n = first.chat, {"calls": 0}

        def dying_chat(*a, **kw):
            if n["calls"] == 2: raise KeyboardInterrupt("simulated crash")
            n["calls"] += 1
            return real(*a, **kw)
        first.chat = dying_chat
        sys_ = PPRSystem(name="ppr_llm", mode="llm", chunk_tokens=50, chunk_overlap=0, llm=first)
        with pytest.raises(KeyboardInterrupt):
            sys_.index(corpus, tmp_path / "index")
        assert not (tmp_path / "index" / "index.json").exists()
        second = llm()
        done = PPRSystem(name="ppr_llm", mode="llm", chunk_tokens=50, chunk_overlap=0, llm=second).index(corpus, tmp_path / "index")
        led = second.ledger.totals()
        assert led["cache_hits"] == 2 and led["cache_misses"] == 3 and led["calls"] >= 3
        assert (tmp_path / "index" / "index.json").exists() and done.stats()["n_units"] == 5
        assert done.stats()["llm_requests"] == 5 and done.stats()["llm_calls"] == led["calls"]
