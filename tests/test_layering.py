"""The package's floors (README "Layout"): base < compiler < TF core < Keras, imports only
downward, checked by import-linter's contracts in ``pyproject.toml`` (imports written
inside functions count), plus what a static check cannot see: which modules an import
loads at run time, and the short forms ``jt.layers`` ... as the Keras modules themselves.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = ("floors", "compiler", "passes", "keras", "keras-no-compiler")


def _lint_imports(root: Path):
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    return subprocess.run([*cmd, "--no-cache", str(root / "pyproject.toml")],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def lint_report():
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    return _lint_imports(ROOT)


def test_every_contract_is_kept(lint_report):
    out = lint_report.stdout + lint_report.stderr
    assert lint_report.returncode == 0, out
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken" in out, out


def test_a_planted_upward_import_breaks_the_contracts(tmp_path):
    """The check can fail: the compiler's IR importing Keras and the backends breaks the
    floors, the compiler's own order, the passes' rule (passes import the IR, so they
    reach a backend and Keras through it) and Keras' own order (every Keras module
    reaches ``layers`` through the core's IR)."""
    pytest.importorskip("importlinter")
    for top in ("jittape", "passes"):
        shutil.copytree(ROOT / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    ir = tmp_path / "jittape/compiler/ir.py"
    ir.write_text(ir.read_text() + textwrap.dedent("""

        def _planted():
            from ..keras import layers  # noqa: F401 - an upward import
            from . import backends  # noqa: F401 - backends sit above the IR
    """))
    report = _lint_imports(tmp_path)
    out = report.stdout + report.stderr
    assert report.returncode != 0, out
    assert "Contracts: 1 kept, 4 broken" in out, out
    assert "jittape.compiler.ir -> jittape.keras" in out, out
    assert "jittape.compiler.ir -> jittape.compiler.backends" in out, out


def _strongly_connected(modules, imported_by):
    """Tarjan's components of a module graph (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(imported_by(root)))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(imported_by(child))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.add(m)
                        if m == node:
                            break
                    out.append(comp)
    return out


def test_no_import_cycle_joins_two_packages():
    """Counting imports inside functions, a cycle stays inside one package: a package's
    own ``__init__`` and its modules may import each other, nothing wider. ``jittape``'s
    root ``__init__`` (which re-exports every floor) is left out: nothing below imports
    it. The declared exception of the floors contract is not an edge."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("jittape", "passes", include_external_packages=False)
    skipped = {("jittape.distributed", "jittape.keras.distribution")}
    modules = graph.modules - {"jittape"}

    def imported_by(m):
        return sorted(t for t in graph.find_modules_directly_imported_by(m)
                      if t in modules and (m, t) not in skipped)

    bad = []
    for comp in _strongly_connected(modules, imported_by):
        if len(comp) < 2:
            continue
        packages = {m if graph.find_children(m) else m.rpartition(".")[0] for m in comp}
        # one package: every member is the package or directly inside it
        top = min(packages, key=len)
        if any(p != top for p in packages):
            bad.append(sorted(comp))
    assert not bad, "import cycles across packages:\n" + "\n".join(map(str, bad))


def _loads(code):
    out = subprocess.run([sys.executable, "-c", code + textwrap.dedent("""
        import sys
        print(sorted(m for m in sys.modules if m.startswith("jittape.keras")))
    """)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("code", ["import jittape", "import jittape.compiler",
                                  "import passes", "import jittape.compiler.backends.cpu",
                                  "import jittape as jt; jt.function(lambda x: x * 2)(1.0)"])
def test_the_core_and_compiler_load_no_keras_module(code):
    assert _loads(code) == []


def test_keras_loads_on_first_use():
    loaded = _loads("import jittape as jt; jt.layers.Dense")
    assert "jittape.keras.layers" in loaded and "jittape.keras" in loaded


def test_short_forms_are_the_keras_modules_and_classes():
    import importlib

    import jittape as jt

    for name in ("layers", "optimizers", "losses", "metrics", "initializers",
                 "regularizers", "constraints"):
        assert getattr(jt, name) is getattr(jt.keras, name)
        assert importlib.import_module(f"jittape.{name}") is getattr(jt.keras, name)
    for name in ("Sequential", "Model", "Input"):
        assert getattr(jt, name) is getattr(jt.keras, name)
    assert importlib.import_module("jittape.layers.core") is importlib.import_module(
        "jittape.keras.layers.core")
    from jittape.optimizers.schedules import ExponentialDecay

    assert ExponentialDecay is jt.keras.optimizers.schedules.ExponentialDecay
    import jittape.cache
    import jittape.compiler.cache

    assert jittape.cache is jittape.compiler.cache is jt.cache
    assert {"keras", "layers", "Sequential", "Input"} <= set(dir(jt))
    with pytest.raises(AttributeError, match="no attribute 'Layers'"):
        jt.Layers  # noqa: B018


def test_keras_imports_no_compiler_module_directly():
    """Contract ``keras-no-compiler`` without import-linter: a plain ast scan, so the
    rule holds even where the extra is missing."""
    import ast

    offenders = []
    for path in (ROOT / "jittape/keras").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("").parts
        pkg = list(rel if rel[-1] == "__init__" else rel[:-1])
        if rel[-1] == "__init__":
            pkg = pkg[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "jittape.compiler" or n.startswith("jittape.compiler.")
                   for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
