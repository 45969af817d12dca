"""Soak `mpsfuzz daemon`: run it for an hour on the fault target with its faults on, kill
it with SIGKILL along the way, and check that it stays flat and loses nothing.

    python bench/soak.py [--minutes 60] [--kills 2] [--jobs 1] [--ops all] [--json FILE]

Every minute it samples the resident memory of the daemon's whole process tree (the
daemon, its lanes and workers: psutil) and the daemon's state (cases, findings). At
evenly spaced moments it SIGKILLs the daemon (the process alone, as an OOM killer would)
and starts it again on the same corpus; at the end it sends SIGTERM and times the exit.

It prints, and writes with --json:
- RSS per sample, of the whole process tree and of the daemon's own process, and for
  each life of the daemon after its first 3 minutes of warm-up, max/median of the
  samples: flat within 10% means at most 1.10;
- whether every finding on disk before each kill is still there after it, whether any
  failure was left waiting for triage at the end, and whether any (op, oracle) has more
  than one finding file (a bug recorded twice);
- the state's counters before and after each restart (they must only grow), and the
  seconds the final SIGTERM took (the goal: 10).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

FAULT_TARGET = "mpsfuzz.testing.faults:target"
WARM_UP_S = 180.0


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def own_rss(pid: int) -> int:
    """The daemon's own process: what would grow if the daemon leaked (its workers are
    replaced and recycled, and repro checks run in interpreters that come and go)."""
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def state(corpus: Path) -> dict:
    try:
        return json.loads((corpus / "daemon" / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def finding_files(corpus: Path, *, merged: bool = True) -> dict[str, tuple]:
    """Every finding file, with ``merged`` those folded into a more general finding too
    (they move to ``merged/``: kept, not lost)."""
    out = {}
    for path in [*corpus.glob("*.json"), *(corpus.glob("merged/*.json") if merged else ())]:
        if path.name.startswith("inflight-"):
            continue
        try:
            data = json.loads(path.read_text())
            out[path.name] = (data["op"], data["oracle"])
        except (OSError, ValueError, KeyError):
            continue
    return out


def start(corpus: Path, args, log) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("MPSFUZZ_FAULTS", None)   # every fault on
    return subprocess.Popen([sys.executable, "-m", "mpsfuzz", "daemon", "--target", FAULT_TARGET, "--ops", args.ops,
                             "--corpus", str(corpus), "--jobs", str(args.jobs), "--timeout", "5", "--no-progress",
                             "--report-every", "120"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--ops", default="all")
    parser.add_argument("--corpus", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--sample-every", type=float, default=60.0)
    args = parser.parse_args()
    corpus = Path(args.corpus or tempfile.mkdtemp(prefix="mpsfuzz-soak-")) / "corpus"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    log_path = corpus.parent / "daemon.log"
    total_s = args.minutes * 60
    kill_at = [total_s * (k + 1) / (args.kills + 1) for k in range(args.kills)]
    samples, lives, restarts = [], [], []
    print(f"soak: {args.minutes:g} min, {args.kills} SIGKILL(s), --jobs {args.jobs}, ops {args.ops}; "
          f"corpus {corpus}; log {log_path}", flush=True)
    t0 = time.monotonic()
    with open(log_path, "ab") as log:
        proc = start(corpus, args, log)
        life = {"started": 0.0, "samples": []}
        next_sample = args.sample_every
        while True:
            now = time.monotonic() - t0
            if kill_at and now >= kill_at[0]:
                kill_at.pop(0)
                before_files, before_state = finding_files(corpus), state(corpus)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                time.sleep(2)   # the lanes and workers notice and exit
                proc = start(corpus, args, log)
                time.sleep(min(60.0, args.sample_every))
                after_files, after_state = finding_files(corpus), state(corpus)
                restarts.append({"at_s": round(now), "findings_before": len(before_files),
                                 "kept": set(before_files) <= set(after_files) or
                                 sorted(set(before_files) - set(after_files)),
                                 "cases_before": before_state.get("cases", 0),
                                 "cases_after": after_state.get("cases", 0),
                                 "runs_after": after_state.get("runs", 0)})
                print(f"  {now / 60:5.1f} min: SIGKILL, restarted: {restarts[-1]}", flush=True)
                lives.append(life)
                life = {"started": time.monotonic() - t0, "samples": []}
                continue
            if now >= total_s:
                break
            if now >= next_sample:
                next_sample += args.sample_every
                st = state(corpus)
                sample = {"t_s": round(now), "rss_mb": round(tree_rss(proc.pid) / 2**20, 1),
                          "daemon_rss_mb": round(own_rss(proc.pid) / 2**20, 1),
                          "cases": st.get("cases", 0), "findings": st.get("findings_new", 0),
                          "alive": proc.poll() is None}
                samples.append(sample)
                life["samples"].append(sample)
                print(f"  {now / 60:5.1f} min: rss {sample['rss_mb']} MB (daemon {sample['daemon_rss_mb']} MB), "
                      f"cases {sample['cases']}, "
                      f"findings {sample['findings']}", flush=True)
                if proc.poll() is not None:
                    print(f"  the daemon died by itself ({proc.returncode})", flush=True)
                    break
            time.sleep(1.0)
        lives.append(life)
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        term_s = time.monotonic() - asked
    flatness, own_flatness = [], []
    for life in lives:
        steady = [s for s in life["samples"] if s["t_s"] - life["started"] >= WARM_UP_S and s["alive"]]
        if len(steady) >= 2:
            for key, out in (("rss_mb", flatness), ("daemon_rss_mb", own_flatness)):
                values = [s[key] for s in steady]
                out.append(round(max(values) / statistics.median(values), 3))
    files = finding_files(corpus, merged=False)
    per_key: dict[tuple, int] = {}
    for key in files.values():
        per_key[key] = per_key.get(key, 0) + 1
    twice = {f"{op}/{oracle}": n for (op, oracle), n in per_key.items() if n > 1}
    pending = sorted(p.name for p in (corpus / "triage-pending").glob("*.json"))
    final = state(corpus)
    summary = {"minutes": args.minutes, "jobs": args.jobs, "ops": args.ops, "samples": samples,
               "restarts": restarts, "rss_max_over_median_per_life": flatness,
               "flat_within_10pct": bool(flatness) and all(f <= 1.10 for f in flatness),
               "daemon_rss_max_over_median_per_life": own_flatness,
               "daemon_flat_within_10pct": bool(own_flatness) and all(f <= 1.10 for f in own_flatness),
               "findings": len(files), "op_oracle_with_several_files": twice, "pending_at_end": pending,
               "sigterm_exit_s": round(term_s, 2), "exit_code": proc.returncode,
               "final_state": {k: final.get(k) for k in ("runs", "cases", "findings_new", "uptime_s", "restarts",
                                                         "harness_errors", "seen_behaviours", "status")}}
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
