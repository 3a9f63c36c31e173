"""Time to a verdict, printed, never asserted (run: .venv/bin/python tests/benchmarks/time_to_verdict.py).

`claimcheck check NAME` with its defaults (16 workers, 20,000 jobs, batch 10, embedded server
started for the run) for every built-in: wall seconds from the command's start to its exit, the
exit code, the double-claimed jobs it reported and how the run stopped. The unsafe ones should
fail within seconds (a `check` stops once a violation is proven); the safe ones drain as before.
`skip-locked-unfenced` (a completion after its lease) is caught by the `lease-expiry` condition.

Options: `--cap SECONDS` ends a run that takes longer (Ctrl-C, so it cleans up; shown as `>cap`),
`--only a,b` runs only those built-ins, `--drain` passes `--drain` to every check (for the
figures before early stop existed, run this file from an older checkout instead), `--plans`
passes `--plans` (default: check's default conditions; `none`: the run as seeded only).
Wall times on a shared 2-core machine are noisy: the load average is printed with each row.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pg_claimcheck.scenarios import builtin_names

from pg_claimcheck.contract.strategy import load_strategy



def check_json(target: str, options: list[str], cap: float) -> tuple[int, float, bool, dict]:
    """`claimcheck check TARGET OPTIONS`, ended by Ctrl-C once it took
    `cap` seconds: its exit code, wall seconds, whether it was capped, and its JSON report ({} if none)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "check.json"
        cmd = [sys.executable, "-m", "pg_claimcheck", "check", target, "--json", str(report), *options]
        started = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            process.communicate(timeout=cap)
            capped = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGINT)  # our own child's group: claimcheck cleans up on Ctrl-C
            process.communicate()
            capped = True
        seconds = time.perf_counter() - started
        doc = json.loads(report.read_text()) if report.exists() else {}
    return process.returncode, seconds, capped, doc


def one(name: str, cap: float, drain: bool, plans: str = "default") -> dict:
    code, seconds, capped, doc = check_json(name, (["--drain"] if drain else []) + ["--plans", plans], cap)
    runs = doc.get("runs", [])
    failed = [c["condition"] for c in doc.get("conditions", []) if c["verdict"] == "VIOLATED"]
    return {"name": name, "seconds": seconds, "capped": capped, "exit": code,
            "double": sum(r["double_claimed_jobs"] for r in runs) if runs else None,
            "stopped_by": ",".join(r["stopped_by"] for r in runs) or "-", "load": os.getloadavg()[0],
            "violated_under": ",".join(failed) or "-"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cap", type=float, default=300.0)
    parser.add_argument("--only", default="")
    parser.add_argument("--drain", action="store_true")
    parser.add_argument("--plans", default="default", choices=("none", "default", "all"),
                        help="check --plans (default: check's own default)")
    args = parser.parse_args()
    names = [n for n in builtin_names() if not args.only or n in args.only.split(",")]
    print(f"{'strategy':22} {'expected':8} {'seconds':>9} {'exit':>4} {'double':>7}  {'violated under':15} load"
          "  stopped by (each run)")
    for name in names:
        row = one(name, args.cap, args.drain, args.plans)
        shown = f">{args.cap:.0f}" if row["capped"] else f"{row['seconds']:.2f}"
        print(f"{name:22} {load_strategy(name).expected:8} {shown:>9} {row['exit']:>4} "
              f"{'-' if row['double'] is None else format(row['double'], ','):>7}  {row['violated_under']:15} "
              f"{row['load']:.2f}  {row['stopped_by']}", flush=True)


if __name__ == "__main__":
    main()
