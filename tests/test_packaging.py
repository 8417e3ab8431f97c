"""Every package in the tree is in what pyproject's package discovery finds: a wheel (not
an editable install, which finds them anyway) would otherwise ship without it."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_h5py_is_a_dependency_not_an_extra():
    """Keras 3 depends on h5py (its .weights.h5 files): so does jittape, and the keras
    extra that used to bring it is an empty alias that old install lines still name."""
    project = _pyproject()["project"]
    names = [d.split(">")[0].split("=")[0].split("[")[0].strip()
             for d in project["dependencies"]]
    assert "h5py" in names
    assert project["optional-dependencies"]["keras"] == []
    (line,) = [x for x in (ROOT / "Makefile").read_text().splitlines() if " -e '." in x]
    assert "keras" not in line and "test" in line
    import h5py  # noqa: F401 - installed with jittape


def test_every_package_is_listed():
    from setuptools import find_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]["find"]
    listed = set(find_packages(str(ROOT), include=find["include"],
                               exclude=find.get("exclude", ())))
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("jittape", "passes") for p in (ROOT / top).rglob("__init__.py")
             if "_generated" not in p.parts}
    assert found == listed, f"missing {sorted(found - listed)}, extra {sorted(listed - found)}"
