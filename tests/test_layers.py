"""The layers declared in pyproject.toml (`[tool.fanin] layers`, lowest first) hold: every module of src/fanin sits in one
layer's subpackage, no module imports one from a later layer (at module level, inside a function or under `TYPE_CHECKING`,
in any spelling: relative, `from fanin.x import`, `import fanin.x`), and the modules' imports form no circle."""
import ast
import json
import re
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


def _targets(n: ast.AST, pkg: list[str], mods: dict[str, Path]) -> list[str]:
    "The fanin modules an import node names, resolved from package `pkg` (relative or absolute, `from` or plain)."
    if isinstance(n, ast.ImportFrom):
        base = pkg[: len(pkg) - n.level + 1] if n.level else []
        target = ".".join(base + ([n.module] if n.module else []))
        return [t for t in [target] + [f"{target}.{a.name}" for a in n.names] if t in mods]
    if isinstance(n, ast.Import): return [a.name for a in n.names if a.name in mods]
    return []


def _imports() -> dict[str, set[str]]:
    "Each module's imports of other fanin modules, resolved to dotted names, wherever in the file they stand."
    mods = _modules()
    out = {}
    for name, p in mods.items():
        pkg = name.split(".")[:-1]
        deps = {t for n in ast.walk(ast.parse(p.read_text())) for t in _targets(n, pkg, mods)}
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


def _function_imports(p: Path, mods: dict[str, Path], name: str) -> list[str]:
    "The fanin modules `p` imports inside a function body."
    pkg = name.split(".")[:-1]
    return [t for f in ast.walk(ast.parse(p.read_text())) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f) for t in _targets(n, pkg, mods)]


def test_the_lab_imports_its_own_modules_at_the_top():
    """Inside the lab, imports of its own modules stand at module level, where the layer test and a reader see them; only the
    doors (the command line, the benches) keep theirs in functions, so `fanin --help` starts without loading the lab. Heavy
    third-party packages (scikit-learn, torch, spaCy, faiss) stay lazy inside functions: the rule is for the lab's modules."""
    mods = _modules()
    lazy = {n: t for n, p in mods.items() if not n.startswith("fanin.doors.") and (t := _function_imports(p, mods, n))}
    assert not lazy, f"in-function imports of the lab's own modules (move them to the module's import cell): {lazy}"


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _exported_cells(nb: Path):
    "(definitions, followed by an asserting example) for each exported code cell of a notebook."
    cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
    src = lambda c: "".join(c["source"])
    exported = lambda c: re.match(r"\s*#\|\s*export", src(c)) is not None
    for i, c in enumerate(cells):
        if not exported(c): continue
        code = "\n".join(line for line in src(c).splitlines() if not line.startswith("#|"))
        names = [d.name for d in ast.parse(code).body if isinstance(d, DEFS)]
        example = False
        for later in cells[i + 1:]:
            if exported(later): break
            if re.search(r"^\s*assert\b", src(later), re.M): example = True; break
        yield names, example


def test_notebooks_teach_one_definition_at_a_time():
    """Each exported cell holds at most one definition, and at least 90% of the cells that define something are followed,
    before the next exported cell, by an example cell that asserts (as nbdev's and fastcore's own notebooks are written)."""
    notebooks = sorted((ROOT / "nbs").glob("*.ipynb")) + sorted((ROOT / "templates").glob("*/*.ipynb"))
    crowded, defined, shown = [], 0, 0
    for nb in notebooks:
        for names, example in _exported_cells(nb):
            if len(names) > 1: crowded.append(f"{nb.name}: {', '.join(names)}")
            if names: defined += 1; shown += example
    assert not crowded, f"exported cells with several definitions (one a cell): {crowded}"
    assert defined > 900 and shown / defined >= 0.90, f"{shown} of {defined} defining cells are followed by an asserting example"
