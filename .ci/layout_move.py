"""The layout move (issue 32): ``git mv`` every module to its floor, then rewrite imports.

Run once from the repository root on a clean tree: ``python .ci/layout_move.py``.

1. Every module in ``MOVES`` (old dotted name -> new dotted name; a package moves with
   everything under it) is moved with ``git mv``.
2. Every import statement in ``jittape/``, ``passes/``, ``tests/``, ``benchmarks/``,
   ``examples/`` and ``.ci/`` is resolved to the absolute module it meant before the move
   (relative imports from the importer's old place), mapped through ``MOVES``, and written
   again only where its meaning would change: relative inside ``jittape/`` (from the
   importer's new place, as the product writes them), absolute elsewhere. ``from P import
   name`` where ``P.name`` is a moved module is split by the new parents when they differ.
3. Dotted names in strings and docs (``"jittape.backends.compile_worker"``, the generated
   modules' import lines, README paths, Makefile) are rewritten by the same table.

Nothing else changes: no line is touched whose import means the same module afterwards.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MOVES = {
    # the compiler: graphs in, programs out
    "jittape.ir": "jittape.compiler.ir",
    "jittape.ir_text": "jittape.compiler.ir_text",
    "jittape.dims": "jittape.compiler.dims",
    "jittape.cache": "jittape.compiler.cache",
    "jittape.profiler": "jittape.compiler.profiler",
    "jittape._malloc": "jittape.compiler.malloc",
    "jittape.backends": "jittape.compiler.backends",
    # Keras, laid out like keras/src
    "jittape.layers": "jittape.keras.layers",
    "jittape.losses": "jittape.keras.losses",
    "jittape.optimizers": "jittape.keras.optimizers",
    "jittape.metrics": "jittape.keras.metrics",
    "jittape.initializers": "jittape.keras.initializers",
    "jittape.regularizers": "jittape.keras.regularizers",
    "jittape.constraints": "jittape.keras.constraints",
    "jittape.keras_tensor": "jittape.keras.keras_tensor",
    "jittape.naming": "jittape.keras.naming",
    "jittape.distributed.keras": "jittape.keras.distribution",
    "jittape.models": "jittape.keras.models.model",
    "jittape.model_config": "jittape.keras.models.functional",
    "jittape.sequential": "jittape.keras.models.sequential",
    "jittape.cloning": "jittape.keras.models.cloning",
    "jittape.summary": "jittape.keras.models.summary",
    "jittape.keras.models": "jittape.keras.models",  # models.py becomes models/__init__.py
    "jittape.trainer": "jittape.keras.trainers.trainer",
    "jittape.data_adapter": "jittape.keras.trainers.data_adapter",
    "jittape.saving": "jittape.keras.saving.weights",
    "jittape._config": "jittape.keras.saving.serialization",
}
NEW_PACKAGES = ["jittape.compiler", "jittape.keras.models", "jittape.keras.trainers",
                "jittape.keras.saving"]
SCANNED = ["jittape", "passes", "tests", "benchmarks", "examples", ".ci"]
TEXT_FILES = ["README.md", "Makefile", "pyproject.toml"]


def module_path(name: str) -> tuple[Path, bool]:
    """(path, is_package) of a dotted module as it is on disk now."""
    base = ROOT.joinpath(*name.split("."))
    if (base / "__init__.py").exists():
        return base / "__init__.py", True
    return base.with_suffix(".py"), False


def new_name(name: str) -> str:
    """The dotted name a module has after the move (longest prefix in MOVES wins)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in MOVES:
            return ".".join([MOVES[head], *parts[i:]])
    return name


def file_module(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve(level: int, module: str | None, importer: str, is_pkg: bool) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def relative(target: str, importer: str, is_pkg: bool) -> tuple[int, str]:
    """(level, module) of the shortest relative import of ``target`` from ``importer``."""
    pkg = importer.split(".") if is_pkg else importer.split(".")[:-1]
    tgt = target.split(".")
    common = 0
    while common < min(len(pkg), len(tgt)) and pkg[common] == tgt[common]:
        common += 1
    level = len(pkg) - common + 1
    return level, ".".join(tgt[common:])


def is_module(name: str) -> bool:
    path, _ = module_path(name)
    return path.exists()


def fmt_from(level: int, module: str, names: list[str]) -> str:
    return f"from {'.' * level}{module} import {', '.join(names)}"


def rewrite_file(path: Path, old_mod: str, old_pkg: bool, new_mod: str, new_pkg: bool,
                 product: bool) -> str | None:
    src = path.read_text()
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits = []  # (node, new statements)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            changed, parts = False, []
            for a in node.names:
                nn = new_name(a.name)
                changed |= nn != a.name
                parts.append(f"{nn} as {a.asname}" if a.asname else nn)
            if changed:
                edits.append((node, [f"import {', '.join(parts)}"]))
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            target = resolve(node.level, node.module, old_mod, old_pkg)
            if not target.startswith(("jittape", "passes")):
                continue
            groups: dict[str, list[str]] = {}
            unchanged = True
            for a in node.names:
                sub = f"{target}.{a.name}"
                if a.name != "*" and is_module(sub):
                    parent, leaf = new_name(sub).rsplit(".", 1)
                    alias = a.asname or (a.name if leaf != a.name else None)
                    text = f"{leaf} as {alias}" if alias and alias != leaf else leaf
                else:
                    parent = new_name(target)
                    text = f"{a.name} as {a.asname}" if a.asname else a.name
                unchanged &= text == (f"{a.name} as {a.asname}" if a.asname else a.name)
                groups.setdefault(parent, []).append(text)
            relative_ok = product and node.level > 0
            if (unchanged and len(groups) == 1 and next(iter(groups)) == (
                    resolve(node.level, node.module, new_mod, new_pkg) if node.level > 0
                    else target)):
                continue
            out = []
            for parent, names in groups.items():
                lv, mod = relative(parent, new_mod, new_pkg) if relative_ok else (0, parent)
                out.append(fmt_from(lv, mod, names))
            edits.append((node, out))
    if not edits:
        return None
    edits.sort(key=lambda e: e[0].lineno, reverse=True)
    for node, out in edits:
        start, end = node.lineno - 1, node.end_lineno - 1
        first, last = lines[start], lines[end]
        indent = first[:node.col_offset]
        trail = last[node.end_col_offset:]
        comment = trail.strip()
        if not comment and end > start:
            m = re.search(r"\(\s*(#.*)$", first.rstrip("\n"))
            comment = m.group(1).strip() if m else ""
        tail = f"  {comment}" if comment else ""
        text = "\n".join((indent if i else first[:node.col_offset]) + s + tail
                         for i, s in enumerate(wrap(out, indent)))
        lines[start:end + 1] = [text + ("\n" if trail.endswith("\n") else "")]
    return "".join(lines)


def wrap(statements: list[str], indent: str) -> list[str]:
    """Statements longer than 99 columns are wrapped in parentheses."""
    out = []
    for s in statements:
        if len(indent) + len(s) <= 99 or " import " not in s:
            out.append(s)
            continue
        head, names = s.split(" import ", 1)
        body, line = [], indent + "    "
        for n in names.split(", "):
            piece = n + ", "
            if len(line) + len(piece) > 99:
                body.append(line.rstrip())
                line = indent + "    "
            line += piece
        body.append(line.rstrip())
        out.append(f"{head} import (\n" + "\n".join(body) + f"\n{indent})")
    return out


def rewrite_text(text: str) -> str:
    keys = sorted((k for k in MOVES if MOVES[k] != k), key=len, reverse=True)
    pat = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
    text = pat.sub(lambda m: MOVES[m.group(1)], text)
    # paths in prose: jittape/backends/cpu.py -> jittape/compiler/backends/cpu.py
    pkeys = sorted(keys, key=len, reverse=True)
    ppat = re.compile(r"(?<![\w/])(" + "|".join(re.escape(k.replace(".", "/")) for k in pkeys)
                      + r")(?=(\.py|/))")
    return ppat.sub(lambda m: MOVES[m.group(1).replace("/", ".")].replace(".", "/"), text)


def main():
    if subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                      text=True).stdout.strip():
        sys.exit("layout_move: the tree has uncommitted changes")
    files = [p for d in SCANNED for p in (ROOT / d).rglob("*.py")
             if "_generated" not in p.parts and ".venv" not in p.parts]
    files = [p for p in files if p.resolve() != Path(__file__).resolve()]
    # 1. plan every file's new module name and the new text, before anything moves
    plan = []
    for p in files:
        old_mod, old_pkg = file_module(p)
        new_mod = new_name(old_mod)
        new_pkg = old_pkg or old_mod == "jittape.keras.models"
        product = p.relative_to(ROOT).parts[0] == "jittape"
        text = rewrite_file(p, old_mod, old_pkg, new_mod, new_pkg, product)
        src = text if text is not None else p.read_text()
        src2 = rewrite_text(src)
        plan.append((p, src2 if src2 != p.read_text() else None))
    for p, text in plan:
        if text is not None:
            p.write_text(text)
    for f in TEXT_FILES:
        fp = ROOT / f
        fp.write_text(rewrite_text(fp.read_text()))
    # 2. move
    for pkg in NEW_PACKAGES:
        d = ROOT.joinpath(*pkg.split("."))
        d.mkdir(parents=True, exist_ok=True)
    for old, new in MOVES.items():
        if old == new:
            continue
        src, is_pkg = module_path(old)
        src = src.parent if is_pkg else src
        dst = ROOT.joinpath(*new.split("."))
        if not is_pkg:
            dst = dst.with_suffix(".py")
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    km = ROOT / "jittape/keras/models.py"
    if km.exists():
        subprocess.run(["git", "mv", str(km), "jittape/keras/models/__init__.py"], cwd=ROOT,
                       check=True)
    for pkg in NEW_PACKAGES:
        init = ROOT.joinpath(*pkg.split(".")) / "__init__.py"
        if not init.exists():
            init.write_text(f'"""``{pkg}``."""\n')
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
