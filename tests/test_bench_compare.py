"""benchmarks/compare.py on made-up pytest-benchmark JSON."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("bench_compare", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def _bench(group, name, median, impl=None, params=None):
    b = {"group": group, "name": name, "fullname": f"benchmarks/test_x.py::{name}",
         "params": params, "extra_info": {}, "stats": {"median": median, "mean": median}}
    if impl is not None:
        b["extra_info"]["impl"] = impl
    return b


def _run_json(benches):
    return {"machine_info": {}, "commit_info": {}, "benchmarks": benches,
            "datetime": "2026-01-01T00:00:00", "version": "5.1.0"}


def _write(tmp_path, fname, benches):
    p = tmp_path / fname
    p.write_text(json.dumps(_run_json(benches)))
    return str(p)


def _suite(scale=1.0, slow=None, factor=1.3):
    """Two groups, each with a numpy reference marked a different way; every time is
    multiplied by ``scale`` (a slower machine), and ``slow`` by ``factor`` too."""
    times = {
        "test_chain[numpy]": ("chain", 1.0e-3, "numpy"),
        "test_chain[cpu]": ("chain", 0.3e-3, "cpu"),
        "test_chain[interpret]": ("chain", 1.4e-3, "interpret"),
        "test_numpy_reference": ("mlp", 90e-6, None),  # reference by its name
        "test_jittape[cpu]": ("mlp", 60e-6, None),
    }
    out = []
    for name, (group, t, impl) in times.items():
        t *= scale * (factor if name == slow else 1.0)
        out.append(_bench(group, name, t, impl=impl))
    return out


def _rows(compare, tmp_path, old, new, **kw):
    return {r.name: r for r in compare.compare(
        compare.load(_write(tmp_path, "old.json", old)),
        compare.load(_write(tmp_path, "new.json", new)), **kw)}


def test_a_uniformly_slower_machine_passes(compare, tmp_path, capsys):
    old = _write(tmp_path, "old.json", _suite())
    new = _write(tmp_path, "new.json", _suite(scale=2.5))
    assert compare.main([old, new]) == 0
    out = capsys.readouterr().out
    assert "REGRESSED" not in out and "No regression" in out
    rows = _rows(compare, tmp_path, _suite(), _suite(scale=2.5))
    for r in rows.values():
        assert r.raw == pytest.approx(2.5)
        assert r.norm == pytest.approx(1.0)
    assert rows["test_chain[numpy]"].verdict == "numpy reference"
    assert rows["test_numpy_reference"].verdict == "numpy reference"
    # on raw medians the same two runs fail
    assert compare.main([old, new, "--raw"]) == 1


def test_one_benchmark_30_percent_slower_fails_naming_it(compare, tmp_path, capsys):
    old = _write(tmp_path, "old.json", _suite())
    new = _write(tmp_path, "new.json", _suite(scale=0.5, slow="test_chain[cpu]"))
    assert compare.main([old, new]) == 1
    out = capsys.readouterr().out
    bad = [ln for ln in out.splitlines() if "REGRESSED" in ln]
    assert len(bad) == 1 and "test_chain[cpu]" in bad[0]
    assert "1 regressed: chain / test_chain[cpu] (1.30x)" in out
    # raw: the new machine is twice as fast, so 0.65x: no regression seen
    assert compare.main([old, new, "--raw"]) == 0


def test_a_faster_benchmark_is_reported_and_passes(compare, tmp_path):
    rows = _rows(compare, tmp_path, _suite(), _suite(slow="test_jittape[cpu]", factor=0.5))
    assert rows["test_jittape[cpu]"].verdict == "faster"
    assert rows["test_jittape[cpu]"].norm == pytest.approx(0.5)
    assert not any(r.regressed for r in rows.values())


def test_threshold_flag(compare, tmp_path):
    old = _write(tmp_path, "old.json", _suite())
    new = _write(tmp_path, "new.json", _suite(slow="test_chain[cpu]", factor=1.3))
    assert compare.main([old, new]) == 1
    assert compare.main([old, new, "--threshold", "1.5"]) == 0
    new = _write(tmp_path, "new.json", _suite(slow="test_chain[cpu]", factor=1.05))
    assert compare.main([old, new]) == 0
    assert compare.main([old, new, "--threshold", "1.02"]) == 1


def test_a_group_without_a_reference_falls_back_to_raw(compare, tmp_path, capsys):
    old = [_bench("passes", "test_pipeline[mlp]", 2e-3),
           _bench("passes", "test_pipeline[deep]", 30e-3)] + _suite()
    new = [_bench("passes", "test_pipeline[mlp]", 2.6e-3),  # 30% slower, raw
           _bench("passes", "test_pipeline[deep]", 30e-3)] + _suite(scale=2.0)
    rows = _rows(compare, tmp_path, old, new)
    r = rows["test_pipeline[mlp]"]
    assert r.norm == pytest.approx(1.3) and r.regressed
    assert "no numpy reference" in r.verdict
    assert "no numpy reference" in rows["test_pipeline[deep]"].verdict
    assert not rows["test_pipeline[deep]"].regressed
    # the other groups are still normalised: the 2x slower machine is no regression
    assert not rows["test_chain[cpu]"].regressed
    assert compare.main([_write(tmp_path, "o.json", old), _write(tmp_path, "n.json", new)]) == 1
    assert "passes / test_pipeline[mlp]" in capsys.readouterr().out


def test_a_reference_missing_from_one_file_falls_back_to_raw(compare, tmp_path):
    new = [b for b in _suite(scale=3.0) if b["name"] != "test_chain[numpy]"]
    rows = _rows(compare, tmp_path, _suite(), new)
    assert rows["test_chain[cpu]"].regressed  # raw 3x
    assert "no numpy reference" in rows["test_chain[cpu]"].verdict
    assert rows["test_chain[numpy]"].verdict == "only in old"
    assert not rows["test_jittape[cpu]"].regressed  # its group still has its reference


def test_reference_rules(compare):
    by_extra = _bench("g", "test_a[x]", 1.0, impl="numpy")
    by_param = _bench("g", "test_a[y]", 1.0, params={"impl": "numpy"})
    by_name = _bench("g", "test_numpy_thing", 1.0)
    other = _bench("g", "test_b", 1.0, params={"impl": "cpu"})
    assert compare.find_reference([other, by_name, by_param, by_extra]) is by_extra
    assert compare.find_reference([other, by_name, by_param]) is by_param
    assert compare.find_reference([other, by_name]) is by_name
    assert compare.find_reference([other]) is None
    # two benchmarks marked numpy the same way: ambiguous, no reference
    assert compare.find_reference([by_name, _bench("g", "test_numpy_other", 1.0)]) is None


def test_benchmarks_in_one_file_only_are_listed_and_do_not_fail(compare, tmp_path, capsys):
    old = _suite() + [_bench("chain", "test_chain[gone]", 1e-3, impl="gone")]
    new = _suite() + [_bench("chain", "test_chain[added]", 50e-3, impl="added")]
    rows = _rows(compare, tmp_path, old, new)
    assert rows["test_chain[gone]"].verdict == "only in old"
    assert rows["test_chain[added]"].verdict == "only in new"
    assert rows["test_chain[added]"].old is None and rows["test_chain[added]"].new == 50e-3
    assert not any(r.regressed for r in rows.values())
    code = compare.main([_write(tmp_path, "o.json", old), _write(tmp_path, "n.json", new)])
    assert code == 0
    out = capsys.readouterr().out
    assert "| test_chain[gone] |" in out and "only in old" in out
    assert "| test_chain[added] |" in out and "only in new" in out


def test_exit_code_as_a_script(tmp_path):
    old = _write(tmp_path, "old.json", _suite())
    ok = _write(tmp_path, "ok.json", _suite(scale=1.7))
    bad = _write(tmp_path, "bad.json", _suite(scale=1.7, slow="test_jittape[cpu]"))
    run = lambda *a: subprocess.run([sys.executable, str(SCRIPT), *a], capture_output=True,
                                    text=True, timeout=60)
    res = run(old, ok)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run(old, bad)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "mlp / test_jittape[cpu]" in res.stdout
    assert res.stdout.startswith("| group | benchmark | old | new |")
