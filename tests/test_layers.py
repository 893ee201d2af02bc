"""The layers declared in pyproject.toml (`[tool.fanin] layers`, lowest first) hold: every module of src/fanin sits in one
layer's subpackage, no module imports one from a later layer (at module level, inside a function or under `TYPE_CHECKING`,
in any spelling: relative, `from fanin.x import`, `import fanin.x`), and the modules' imports form no circle."""
import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fanin"


def _layers() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["fanin"]["layers"]


def _modules() -> dict[str, Path]:
    "Every module of the package by dotted name (`fanin.judging.metrics`), packages' `__init__` and `_modidx` aside."
    return {"fanin." + ".".join(p.relative_to(SRC).with_suffix("").parts): p for p in SRC.rglob("*.py")
            if p.stem not in ("__init__", "_modidx")}


def _imports() -> dict[str, set[str]]:
    "Each module's imports of other fanin modules, resolved to dotted names, wherever in the file they stand."
    mods = _modules()
    out = {}
    for name, p in mods.items():
        pkg = name.split(".")[:-1]
        deps = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                base = pkg[: len(pkg) - n.level + 1] if n.level else []
                target = ".".join(base + ([n.module] if n.module else []))
                cands = [target] + [f"{target}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import): cands = [a.name for a in n.names]
            else: continue
            deps |= {c for c in cands if c in mods}
        out[name] = deps - {name}
    return out


def test_every_module_sits_in_a_declared_layer():
    layers = _layers()
    stray = [m for m in _modules() if m.split(".")[1] not in layers]
    assert not stray, f"modules outside the layers declared in pyproject.toml ([tool.fanin] layers): {sorted(stray)}"
    assert all((SRC / l / "__init__.py").exists() for l in layers), "every declared layer is a subpackage with an __init__.py"


def test_no_module_imports_a_later_layer():
    level = {l: i for i, l in enumerate(_layers())}
    lv = lambda m: level[m.split(".")[1]]
    bad = [f"{m} -> {d}" for m, deps in _imports().items() for d in deps if lv(d) > lv(m)]
    assert not bad, "imports from a later layer (pyproject.toml, [tool.fanin] layers):\n" + "\n".join(sorted(bad))


def test_the_layer_test_sees_every_spelling(tmp_path):
    "The import reader resolves relative, absolute and TYPE_CHECKING imports: a check that cannot fail checks nothing."
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..doors.cli import main\ndef f():\n    import fanin.run.pipeline\n"
    tree = ast.parse(text)
    found = [(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
            [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert (2, "doors.cli") in found and "fanin.run.pipeline" in found


def test_no_import_circles():
    "A circle of imports (a -> b -> ... -> a), inside a layer or across layers, is a module pair that cannot be read apart."
    graph = _imports()
    circles, state = [], {}
    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1: circles.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state: visit(d, path + [d])
        state[m] = 2
    for m in sorted(graph):
        if m not in state: visit(m, [m])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_long_functions_say_why():
    "A function over 60 lines says in its docstring why it is kept whole (module size follows cohesion, not a cap)."
    long = []
    for p in sorted(SRC.rglob("*.py")):
        if p.stem == "_modidx": continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60:
                if "kept whole" not in (ast.get_docstring(n) or "").lower():
                    long.append(f"{p.relative_to(SRC)}: {n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert not long, f"functions over 60 lines without 'Kept whole: <why>' in their docstring: {long}"
