"""A clone with nothing beside it: `make reproduce` names the missing data in one line before any install or DVC stage, and
with a local mirror of the data it fetches, verifies and runs. The clone is made from this checkout's committed HEAD."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import need_real_data

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def _clone(tmp_path) -> Path:
    "A clone in an empty folder: nothing beside it (no ../shared)."
    dest = tmp_path / "lab"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    assert not (dest.parent / "shared").exists()
    return dest


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("FANIN_WILDGRAPHBENCH", "FANIN_DATA_MIRROR", "FANIN_OFFLINE", "FANIN_HOME")}
    return {**env, **extra}


def test_offline_it_stops_before_any_install_in_one_line_per_release(tmp_path):
    lab = _clone(tmp_path)
    r = subprocess.run(["make", "-C", str(lab), "reproduce"], capture_output=True, text=True, timeout=120, env=_env(FANIN_OFFLINE="1"))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr + r.stdout
    lines = [l for l in r.stderr.splitlines() if l.startswith("make reproduce:")]
    assert len(lines) == 2, r.stderr
    wgb, hip = lines
    assert f"wildgraphbench is not at {lab.parent / 'shared' / 'data' / 'wildgraphbench'}" in wgb and "params.yaml" in wgb, wgb
    assert "hipporag_samples is not at" in hip and "FANIN_DATA_MIRROR" in hip, hip
    assert not (lab / ".venv").exists(), "the install ran before the data was checked"


def test_with_a_local_mirror_it_fetches_verifies_and_runs(tmp_path):
    need_real_data(SHARED / "wildgraphbench" / "QA", "a mirror of the data (the real WildGraphBench release)")
    lab = _clone(tmp_path)
    (lab / ".venv").symlink_to(ROOT / ".venv")   # the lab's environment, installed once; `-o` tells make it is up to date
    r = subprocess.run(["make", "-C", str(lab), "-o", ".venv/.installed", "reproduce", "STAGES=data"], capture_output=True, text=True,
                       timeout=900, env=_env(FANIN_DATA_MIRROR=str(SHARED)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "data: wildgraphbench verified and in place" in r.stderr and "data: hipporag_samples verified and in place" in r.stderr
    assert (lab.parent / "shared" / "data" / "wildgraphbench" / "QA").is_dir()
    assert (lab / "outputs" / "data" / "snapshot.json").is_file(), r.stdout[-2000:]


def test_a_mirror_that_differs_from_the_pinned_release_is_refused(tmp_path):
    need_real_data(SHARED / "hipporag_samples", "a mirror of the data (HippoRAG's samples)")
    import shutil
    from fanin.data.release import ReleaseError, fetch
    mirror = tmp_path / "mirror" / "hipporag_samples"
    shutil.copytree(SHARED / "hipporag_samples", mirror)
    with open(mirror / "hotpotqa_train.json", "ab") as f: f.write(b" ")
    with pytest.raises(ReleaseError, match="failed its check"):
        fetch("hipporag_samples", tmp_path / "dest", mirror=tmp_path / "mirror")
    assert not (tmp_path / "dest").exists()
