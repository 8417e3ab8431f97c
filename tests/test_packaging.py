"""Every package in the tree is in what pyproject's package discovery finds: a wheel (not
an editable install, which finds them anyway) would otherwise ship without it."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


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
