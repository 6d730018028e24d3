"""The package's imports, every one of them: no circle between modules and none running up the layers.

import-linter (``lint-imports``, run by the test command) sees only the imports a module runs when it is
loaded; an import written inside a function escapes it, and two such imports can close a circle that
nothing reports. This test parses every module of ``src/lidar_fmu`` with ``ast`` and counts every
``import`` statement wherever it stands (module level, inside functions and classes, under
``TYPE_CHECKING``), then checks the graph against the layers ``pyproject.toml`` gives import-linter.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lidar_fmu"


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name → file, for every module of the package in ``package_dir``."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement may load (``from a import b`` may load the module ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports anywhere in its body (an import of ``a.b.name`` counts as
    one of the module ``a.b``; a package's own ``__init__`` is the package's name)."""
    modules = module_files(package_dir)
    root = package_dir.name

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for imported in _imported_names(node, name, is_package):
                target = owner(imported) if imported.split(".")[0] == root else None
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layers_of(pyproject: Path) -> list[list[str]]:
    """import-linter's "layers" contract, top first: each layer a list of independent siblings."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def upward_imports(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Imports from a lower layer into a higher one, or between independent siblings of one layer."""
    place = {}
    for depth, layer in enumerate(layers):
        for sibling in layer:
            place[sibling] = (depth, sibling)

    def where(module: str) -> tuple[int, str] | None:
        while module and module not in place:
            module = module.rpartition(".")[0]
        return place.get(module)

    bad = []
    for source, targets in sorted(graph.items()):
        here = where(source)
        for target in sorted(targets):
            there = where(target)
            if here is None or there is None:
                continue
            if there[0] < here[0] or (there[0] == here[0] and there[1] != here[1]):
                bad.append(f"{source} → {target}")
    return bad


def forbidden_imports(graph: dict[str, set[str]], pyproject: Path) -> list[str]:
    """Imports that import-linter's "forbidden" contracts rule out (a module or any below it)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]

    def within(module: str, names: list[str]) -> bool:
        return any(module == name or module.startswith(name + ".") for name in names)

    bad = []
    for contract in (c for c in config["contracts"] if c["type"] == "forbidden"):
        for source, targets in sorted(graph.items()):
            if within(source, contract["source_modules"]):
                bad += [f"{source} → {t}" for t in sorted(targets) if within(t, contract["forbidden_modules"])]
    return bad


def test_no_import_circle_counting_imports_inside_functions():
    found = circles(import_graph(PACKAGE))
    assert not found, "import circles: " + "; ".join(" ↔ ".join(c) for c in found)


def test_no_import_runs_up_the_layers():
    bad = upward_imports(import_graph(PACKAGE), layers_of(ROOT / "pyproject.toml"))
    assert not bad, "imports against the layers of pyproject.toml: " + "; ".join(bad)


def test_no_forbidden_import_even_inside_functions():
    bad = forbidden_imports(import_graph(PACKAGE), ROOT / "pyproject.toml")
    assert not bad, "imports the contracts of pyproject.toml forbid: " + "; ".join(bad)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_check_sees_a_circle_closed_inside_functions(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from .b import g\n    return g\n",
        "low/b.py": "def g():\n    from pkg.low import a\n    return a\n",
        "high.py": "from .low.a import f\n",
    })
    graph = import_graph(package)
    assert graph["pkg.low.a"] == {"pkg.low.b"} and graph["pkg.low.b"] == {"pkg.low", "pkg.low.a"}
    assert circles(graph) == [["pkg.low.a", "pkg.low.b"]]
    assert upward_imports(graph, [["pkg.high"], ["pkg.low"]]) == []
    assert upward_imports({"pkg.low.a": {"pkg.high"}}, [["pkg.high"], ["pkg.low"]]) == ["pkg.low.a → pkg.high"]
    assert upward_imports({"pkg.x": {"pkg.y"}}, [["pkg.x", "pkg.y"]]) == ["pkg.x → pkg.y"]
