"""How long the command line takes to answer (issue 39, point 4): the wall time of
``python -m mpsfuzz --version``, ``run --help``, a bad argument and ``ops``, beside
``python -c "import torch"`` measured in the same run, and each one's ratio to it.

    python bench/cli_startup.py [--repeat 5] [--json FILE]

Each command runs ``--repeat`` times in a fresh interpreter, interleaved (a machine
busy with something else slows them alike); the median is reported, and the best.
`--version`, `--help` and a bad argument import no torch, and should answer in a small
fraction of torch's import; `ops` lists the catalogue, which is built of torch callables,
so it costs torch's import and the catalogue's construction.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    'python -c "import torch"': ["-c", "import torch"],
    "mpsfuzz --version": ["-m", "mpsfuzz", "--version"],
    "mpsfuzz run --help": ["-m", "mpsfuzz", "run", "--help"],
    "mpsfuzz run --budget nonsense": ["-m", "mpsfuzz", "run", "--budget", "nonsense"],
    "mpsfuzz ops": ["-m", "mpsfuzz", "ops"],
}
BASELINE = 'python -c "import torch"'


def wall_time(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(repeat):
        for name, args in COMMANDS.items():
            times[name].append(wall_time(args))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the times as JSON")
    args = parser.parse_args()
    times = measure(max(1, args.repeat))
    base = statistics.median(times[BASELINE])
    rows = []
    print(f"{'command':<32} {'median s':>9} {'best s':>8} {'/ import torch':>15}")
    for name, runs in times.items():
        median = statistics.median(runs)
        rows.append({"command": name, "median_s": round(median, 3), "best_s": round(min(runs), 3),
                     "ratio_to_import_torch": round(median / base, 3), "runs_s": [round(t, 3) for t in runs]})
        print(f"{name:<32} {median:>9.3f} {min(runs):>8.3f} {median / base:>15.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"repeat": args.repeat, "python": sys.version.split()[0],
                                               "commands": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
