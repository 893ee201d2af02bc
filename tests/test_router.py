"""The fan-in router on a fixture where fan-in is known: classifier trained on one half, judged on the other; routing and regions."""
from fanin.systems.graphs import EntityGraphSystem
from fanin.systems.router import FanInClassifier, RouterSystem, split_of
from fanin.core.schema import Corpus, Document, Instance
from fanin.systems.flat import BM25System

PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "John Lennon", "Marie Curie", "Isaac Newton", "Rosalind Franklin",
          "Niels Bohr", "Emmy Noether", "Carl Gauss", "Srinivasa Ramanujan", "Edsger Dijkstra"]
SINGLE = ["In what year was {a} born?", "Where did {a} die?", "What was the first job of {a}?"]
MULTI = ["Compare the careers of {a} and {b}, and list what each of them built.",
         "Which awards did {a} and {b} both receive, and how did their work differ?"]


class Bench:
    "A benchmark-like object: questions whose fan-in is known by construction."
    def __init__(self):
        qs = []
        for i, a in enumerate(PEOPLE):
            b = PEOPLE[(i + 1) % len(PEOPLE)]
            qs += [Instance(id=f"s{i}-{j}", dataset="fx", query=t.format(a=a), qtype="single-fact", gold_docs=[a], fan_in=1)
                   for j, t in enumerate(SINGLE)]
            qs += [Instance(id=f"m{i}-{j}", dataset="fx", query=t.format(a=a, b=b), qtype="multi-fact", gold_docs=[a, b], fan_in=2)
                   for j, t in enumerate(MULTI)]
        self._qs = qs

    def instances(self, domain=None): return self._qs


def test_split_is_stable_and_near_the_share():
    ids = [f"q{i}" for i in range(1000)]
    assert [split_of(i) for i in ids] == [split_of(i) for i in ids]
    assert 0.45 < sum(split_of(i) == "train" for i in ids) / 1000 < 0.55
    assert [split_of(i, seed=1) for i in ids] != [split_of(i) for i in ids]


def test_classifier_learns_fan_in_on_the_training_half_and_predicts_the_test_half():
    qs = Bench().instances()
    train = [q for q in qs if split_of(q.id) == "train"]
    test = [q for q in qs if split_of(q.id) == "test"]
    clf = FanInClassifier().fit([q.query for q in train], [q.fan_in >= 2 for q in train])
    p = clf.predict_proba([q.query for q in test])
    acc = sum((pi >= 0.5) == (q.fan_in >= 2) for pi, q in zip(p, test)) / len(test)
    assert acc >= 0.9, acc


def test_router_sends_multi_source_questions_through_the_region():
    corpus = Corpus("fx", [Document(id=a, title=a, text=f"{a} was a scientist. {a} worked with {PEOPLE[(i + 1) % len(PEOPLE)]} on mathematics.")
                           for i, a in enumerate(PEOPLE)] +
                    [Document(id="noise", title="Noise", text="Careers of scientists differ. Awards are received. Work is built and compared.")])
    r = RouterSystem(fine=BM25System(chunk_tokens=50, chunk_overlap=0), coarse=EntityGraphSystem(name="entity_mention", method="entity_mention"),
                     dataset=Bench(), coarse_k=3).index(corpus)
    assert r.stats()["train_questions"] > 10
    single = r.retrieve("In what year was Ada Lovelace born?", 2)
    assert single[0].meta["route"] == "fine"
    q = "Compare the careers of Marie Curie and Isaac Newton, and list what each of them built."
    multi = r.retrieve(q, 3)
    assert multi[0].meta["route"] == "coarse_to_fine" and multi[0].meta["region_docs"] >= 2
    assert "noise" not in [u.doc_id for u in multi[:2]] and {u.doc_id for u in multi[:2]} <= {"Marie Curie", "Isaac Newton", "Emmy Noether", "Niels Bohr"}


def test_router_run_key_ignores_where_and_how_loudly_its_components_run():
    from fanin.core.config import compose, system_hash
    base = compose(["system=router"])
    assert system_hash(base) == system_hash(compose(["system=router", "progress=false"]))
    assert system_hash(base) != system_hash(compose(["system=router", "system.fine.k1=1.2"]))


def test_routing_report_on_real_pipeline_runs(tiny_overrides, real_data_root):
    """The router (classifier trained on the real benchmark's training half; coarse = entity_mention, no LLM) and bm25 run on the
    fixture through the pipeline; the report covers exactly the fixture's test-half questions with gold documents."""
    from fanin.run.pipeline import run
    from fanin.systems.router import routing_report
    (router_f,) = run(tiny_overrides + ["system=router", "system@system.coarse=entity_mention", "system.coarse.n_process=1",
                                        f"system.train_root={real_data_root}", "system.train_domains=all"])
    (bm25_f,) = run(tiny_overrides + ["system=bm25"])
    acc, cmp = routing_report(router_f, [bm25_f])
    assert list(acc.questions_of) == ["single source", "multi source", "all"]
    assert acc.questions.tolist() == [1, 1, 2]  # nature-121c488d6e (fan-in 1) and nature-d86138075d (fan-in 3) hash into the test half
    assert 0 <= acc.accuracy.iloc[2] <= 1
    assert cmp.system.tolist() == ["router", "bm25"] and cmp.questions.tolist() == [2, 2]
