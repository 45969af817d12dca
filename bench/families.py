"""One campaign per op family, in parallel, on one target: what a new user runs first on
real hardware, and the record behind docs/real-findings.md.

    python bench/families.py --target cuda --budget 400 [--families linalg,nn,...]
        [--jobs 8] [--out DIR] [--seed 11] [-- extra mpsfuzz run flags]

Each family runs ``python -m mpsfuzz run --ops FAMILY`` into its own corpus under
``DIR/<target>/<family>/`` with its log beside it. At the end it prints, per family:
exit code (2 or a traceback is a campaign death), cases and cases/s, harness errors,
and findings per status (new, known-bug, cpu-bug, capability, unconfirmed, flaky);
then the totals. ``--json FILE`` writes the same as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FAMILIES = ("linalg", "elementwise", "reduction", "nn", "indexing", "fft", "random", "opinfo")
STATUSES = ("new", "known-bug", "cpu-bug", "capability", "unconfirmed", "flaky", "fixed")


def run_family(family: str, args, extra: list[str]) -> dict:
    corpus = Path(args.out) / args.target / family
    corpus.mkdir(parents=True, exist_ok=True)
    log = corpus.parent / f"{family}.log"
    command = [sys.executable, "-m", "mpsfuzz", "run", "--ops", family, "--target", args.target,
               "--budget", f"{args.budget}s", "--seed", str(args.seed), "--corpus", str(corpus),
               "--no-progress", *extra]
    start = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    elapsed = time.monotonic() - start
    text = log.read_text(errors="replace")
    findings = [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]
    counts = {s: sum(f["status"] == s for f in findings) for s in STATUSES}
    done_line = next((ln for ln in text.splitlines() if ln.startswith("done (")), "")
    cases = re.search(r"(\d+) cases in", done_line)
    harness = re.search(r"harness errors (\d+)", done_line)
    return {"family": family, "exit": done.returncode, "seconds": round(elapsed, 1),
            "died": done.returncode == 2 or "Traceback" in text or "internal error" in text,
            "cases": int(cases.group(1)) if cases else 0,
            "cases_per_s": round(int(cases.group(1)) / elapsed, 2) if cases and elapsed else 0.0,
            "harness_errors": int(harness.group(1)) if harness else 0,
            "stopped": done_line.split(")")[0].removeprefix("done (") if done_line else "?",
            "findings": counts,
            "new": [{"op": f["op"], "oracle": f["oracle"], "kind": f["kind"], "variant": f["variant"],
                     "title": f["title"], "explanation": f["explanation"],
                     "repro": (f.get("repro") or {}).get("verified"), "file": f"{family}/{Path(p).name}"}
                    for f, p in zip(findings, sorted(corpus.glob("*.json"))) if f["status"] == "new"],
            "log": str(log)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--budget", type=float, default=400)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--jobs", type=int, default=len(FAMILIES))
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", default="family-campaigns")
    parser.add_argument("--json", default=None)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    families = [f for f in args.families.split(",") if f]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda f: run_family(f, args, extra), families))
    print(f"target {args.target}, budget {args.budget:g}s per family")
    print(f"{'family':12} {'exit':>4} {'died':>5} {'cases':>6} {'/s':>6} {'harness':>7} "
          + " ".join(f"{s:>11}" for s in STATUSES))
    for r in results:
        print(f"{r['family']:12} {r['exit']:>4} {str(r['died']):>5} {r['cases']:>6} {r['cases_per_s']:>6} "
              f"{r['harness_errors']:>7} " + " ".join(f"{r['findings'][s]:>11}" for s in STATUSES))
    totals = {s: sum(r["findings"][s] for r in results) for s in STATUSES}
    deaths = sum(r["died"] for r in results)
    print(f"campaign deaths: {deaths} of {len(results)}; cases {sum(r['cases'] for r in results)}; "
          + ", ".join(f"{s} {n}" for s, n in totals.items()))
    for r in results:
        for f in r["new"]:
            print(f"  new: {f['file']}: {f['title']} | {f['explanation']} | repro {f['repro']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"target": args.target, "budget_s": args.budget,
                                               "results": results, "totals": totals, "deaths": deaths}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
