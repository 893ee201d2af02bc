"""A fast slice of the fault run (tests/fault_run.py): one fault of each kind that once ended in a raw traceback, a silent wrong
result or a leak, run through the real `fanin` command; each must now stop clearly or survive with a correct result."""
import pytest

import fault_run

SLICE = ("emptied gold page (0 bytes)", "question line of 2 MB", "misspelt added key +k_sumary=3", "paths.outputs is a file",
         "metrics.csv overwritten", "manifest.json overwritten", "packs file cut in half", "a key written into an override",
         "reply that claims JSON and is not", "SIGTERM says what it kept (exit 143)", "experiment_name=../../x", "a 300-character folder name",
         "a !!python tag in a user config", "a homoglyph domain name (Cyrillic а)")


@pytest.mark.parametrize("name", SLICE)
def test_fault(name):
    (f,) = [f for f in fault_run.faults() if f.name == name]
    r = fault_run.run_fault(f)
    assert r["outcome"] in ("survived", "stopped (clear)"), r


def test_the_fault_run_covers_every_kind():
    fs = fault_run.faults()
    assert len(fs) >= 100 and {f.category for f in fs} == {"data", "config", "interruption", "concurrency", "endpoint", "caches", "secrets",
                                                           "environment"}
    assert len({f.name for f in fs}) == len(fs)
