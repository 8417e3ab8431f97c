"""Compare two pytest-benchmark runs fairly across machines of different speed.

    python benchmarks/compare.py OLD.json NEW.json [--threshold 1.10] [--raw]

``OLD.json`` and ``NEW.json`` are ``--benchmark-json`` files (``make bench`` writes
``bench.json``). Each benchmark's time is its ``stats.median``, *normalised* by the
median of its group's numpy reference in the same file: a run on a machine half as
fast doubles every time, numpy's included, and its normalised times stay the same.
The change of a benchmark is ``normalised_new / normalised_old``; above ``--threshold``
(default 1.10: 10% slower relative to numpy) it is a regression.

The numpy reference of a group is, in this order of preference, the one benchmark of
the group with

1. ``extra_info["impl"] == "numpy"`` (the suite sets ``benchmark.extra_info["impl"]``),
2. else ``params["impl"] == "numpy"`` (a test parametrized on ``impl``),
3. else ``"numpy"`` in its name (``test_numpy_reference``, ``test_x[numpy-1M]``).

The first rule that matches settles it; if it matches more than one benchmark the
reference is ambiguous and the group has none. A group without a reference (in either
file) is compared on raw medians, and its rows say so. ``--raw`` compares every
benchmark on raw medians. Benchmarks are matched across the files by ``fullname``
(file and test id); those in one file only are listed and never fail the comparison.

Prints a markdown table; exits 1 when any compared ratio exceeds the threshold, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass


@dataclass
class Bench:
    key: str
    group: str
    name: str
    median: float
    ref: float | None  # the median of the group's numpy reference, None if there is none
    is_ref: bool


def _is_numpy_by(rule: int, b: dict) -> bool:
    if rule == 0:
        return (b.get("extra_info") or {}).get("impl") == "numpy"
    if rule == 1:
        return (b.get("params") or {}).get("impl") == "numpy"
    return "numpy" in b.get("name", "").lower()


def find_reference(benches: list[dict]) -> dict | None:
    """The numpy reference among one group's benchmarks (the rules in the docstring)."""
    for rule in range(3):
        hits = [b for b in benches if _is_numpy_by(rule, b)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            return None  # ambiguous
    return None


def load(path: str) -> dict[str, Bench]:
    """The benchmarks of one ``--benchmark-json`` file by key, with their references."""
    with open(path) as f:
        data = json.load(f)
    groups: dict[str, list[dict]] = {}
    for b in data.get("benchmarks", []):
        groups.setdefault(b.get("group") or "", []).append(b)
    out = {}
    for group, benches in groups.items():
        ref = find_reference(benches)
        ref_median = ref["stats"]["median"] if ref is not None else None
        if not ref_median:  # a zero median cannot normalise anything
            ref_median = None
        for b in benches:
            key = b.get("fullname") or b["name"]
            out[key] = Bench(key, group, b["name"], b["stats"]["median"], ref_median,
                             b is ref)
    return out


@dataclass
class Row:
    group: str
    name: str
    old: float | None
    new: float | None
    raw: float | None
    norm: float | None  # the ratio the verdict uses (normalised, or raw as a fallback)
    verdict: str
    regressed: bool = False


def compare(old: dict[str, Bench], new: dict[str, Bench], threshold: float = 1.10,
            raw: bool = False) -> list[Row]:
    rows = []
    for key in list(old) + [k for k in new if k not in old]:
        o, n = old.get(key), new.get(key)
        b = n or o
        if o is None or n is None:
            rows.append(Row(b.group, b.name, o and o.median, n and n.median, None, None,
                            "only in new" if o is None else "only in old"))
            continue
        ratio_raw = n.median / o.median if o.median else float("inf")
        note = ""
        if raw:
            ratio = ratio_raw
        elif o.ref is None or n.ref is None:
            ratio, note = ratio_raw, " (raw: no numpy reference)"
        else:
            ratio = (n.median / n.ref) / (o.median / o.ref) if o.median else float("inf")
        if n.is_ref and not raw:
            verdict = "numpy reference"
        elif ratio > threshold:
            verdict = "REGRESSED"
        elif ratio < 1 / threshold:
            verdict = "faster"
        else:
            verdict = "same"
        rows.append(Row(n.group, n.name, o.median, n.median, ratio_raw, ratio,
                        verdict + note, verdict == "REGRESSED"))
    return rows


def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3f}"


def table(rows: list[Row], raw: bool = False) -> str:
    head = "normalised ratio" if not raw else "ratio used"
    lines = [f"| group | benchmark | old | new | raw ratio | {head} | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.group} | {r.name} | {fmt_time(r.old)} | {fmt_time(r.new)} | "
                     f"{fmt_ratio(r.raw)} | {fmt_ratio(r.norm)} | {r.verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", help="the earlier --benchmark-json file")
    ap.add_argument("new", help="the later --benchmark-json file")
    ap.add_argument("--threshold", type=float, default=1.10,
                    help="fail when a ratio exceeds this (default 1.10: 10%% slower)")
    ap.add_argument("--raw", action="store_true",
                    help="compare raw medians, not medians normalised by numpy's")
    args = ap.parse_args(argv)
    if args.threshold <= 0:
        ap.error("--threshold must be positive")
    rows = compare(load(args.old), load(args.new), args.threshold, args.raw)
    print(table(rows, args.raw))
    bad = [r for r in rows if r.regressed]
    what = "raw medians" if args.raw else "medians normalised by each group's numpy reference"
    print(f"\n{len(rows)} benchmarks compared on {what}, threshold {args.threshold:g}.")
    if bad:
        print(f"{len(bad)} regressed: " + ", ".join(f"{r.group} / {r.name} ({r.norm:.2f}x)"
                                                     for r in bad))
        return 1
    print("No regression.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
