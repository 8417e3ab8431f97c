"""Print a pytest-benchmark JSON file as one table per group: each benchmark's median,
its ratio to the group's numpy reference (``extra_info["impl"] == "numpy"``), the
workload's floor on this machine (``floors.py``) and the ratio to it, and the compile
time kept out of the steady-state figure.

    python benchmarks/report.py bench.json [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys


def fmt_time(s) -> str:
    if s is None:
        return ""
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def _impl(b) -> str:
    return (b.get("extra_info") or {}).get("impl") or b["name"]


def _notes(info: dict, median: float) -> str:
    """What a fresh-process benchmark measured inside its process (its median is the
    whole process: interpreter start-up and imports too); for a step across the ranks of
    an MPI job, the job's shape and the allreduce's cost per step."""
    if "ranks" in info:
        return _rank_notes(info, median)
    if "first_call_s" not in info:
        return ""
    out = f"first call {fmt_time(info['first_call_s'])}"
    if info.get("compiled_s", 0) > info["first_call_s"] + 1e-3:
        out += f", compiled after {fmt_time(info['compiled_s'])}"
    return out + f" (import jittape {fmt_time(info.get('import_s'))})"


def _rank_notes(info: dict, median: float) -> str:
    n, t = info["ranks"], info["threads_per_rank"]
    wall = info.get("wall_per_step_s") or median  # whole blocks: a rank's waits included
    out = (f"{n} rank{'s' if n > 1 else ''} x batch {info['batch_per_rank']} (global "
           f"{info['global_batch']}: {info['global_batch'] / wall:,.0f} samples/s), {t} "
           f"thread{'s' if t > 1 else ''} each; {fmt_time(wall)} per step over whole blocks")
    if "allreduce_overhead_s" in info:
        out += (f"; allreduce of {info['message_bytes'] / 1e6:.2f} MB: "
                f"{'+' if info['allreduce_overhead_s'] >= 0 else '-'}"
                f"{fmt_time(abs(info['allreduce_overhead_s']))} per step")
    return out


def groups(data: dict) -> dict:
    out: dict = {}
    for b in data["benchmarks"]:
        out.setdefault(b.get("group") or "(no group)", []).append(b)
    return out


def report(data: dict, markdown: bool = False) -> str:
    lines = []
    ceil = next((b["extra_info"] for b in data["benchmarks"]
                 if "bandwidth_Bps" in (b.get("extra_info") or {})), None)
    if ceil:
        lines.append(f"machine ceilings (this run): copy bandwidth "
                     f"{ceil['bandwidth_Bps'] / 1e9:.1f} GB/s (read + write), float32 GEMM "
                     f"{ceil['gemm_flops'] / 1e9:.1f} GFLOP/s")
    head = ["impl", "median", "vs numpy", "floor", "vs floor", "compile (kept out)", "notes"]
    for name, bs in groups(data).items():
        ref = next((b for b in bs if _impl(b) == "numpy"), None)
        rows = []
        for b in bs:
            info = b.get("extra_info") or {}
            med = b["stats"]["median"]
            vs_np = f"{med / ref['stats']['median']:.2f}×" if ref else ""
            fl = info.get("floor_s")
            rows.append([_impl(b), fmt_time(med), vs_np,
                         f"{fmt_time(fl)} ({info.get('floor_basis')})" if fl else "",
                         f"{med / fl:.2f}×" if fl else "", fmt_time(info.get("compile_s")),
                         _notes(info, med)])
        lines.append("")
        lines.append(f"## {name}" if markdown else f"-- {name} --")
        if markdown:
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + " --- |" * len(head))
            lines += ["| " + " | ".join(r) + " |" for r in rows]
        else:
            w = [max(len(r[j]) for r in [head] + rows) for j in range(len(head))]
            lines += ["  ".join(c.ljust(w[j]) for j, c in enumerate(r)).rstrip()
                      for r in [head] + rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    with open(args.json) as f:
        print(report(json.load(f), args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
