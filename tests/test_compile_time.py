"""On compiled targets a hang is a hang only after compilation (issue 12, point 3):
compile time does not count against the per-case timeout, has its own budget, and a
compilation that outlasts it is reported as slow compilation, not as a hang. A target
that hangs once compiled is still a hang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = '''
import os, time, torch

class SlowCompiling:
    """torch.compile with a backend that takes COMPILE_S seconds to compile every case;
    with HANG_5D set, the compiled call then never returns for inputs of 5+ dims."""
    name = "slow-compiling-cpu"
    device = "cpu"

    def is_available(self):
        return True

    def run(self, fn, *args, **kwargs):
        seconds = float(os.environ["COMPILE_S"])

        def backend(gm, example_inputs):
            time.sleep(seconds)
            return gm.forward
        torch._dynamo.reset()  # every case compiles
        out = torch.compile(lambda *a, **k: fn(*a, **k), backend=backend, dynamic=False)(*args, **kwargs)
        if os.environ.get("HANG_5D") and any(isinstance(a, torch.Tensor) and a.dim() >= 5 for a in args):
            while True:
                time.sleep(1)
        return out

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


def target():
    return SlowCompiling()
'''


def _run(tmp_path: Path, *args: str, **env: str):
    (tmp_path / "slow_target.py").write_text(TARGET)
    corpus = tmp_path / "corpus"
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", "neg", "--target", "slow_target:target",
                           "--corpus", str(corpus), "--no-progress", "--oracles", "values,hang,crash",
                           "--no-variants", *args],
                          cwd=tmp_path, text=True, capture_output=True, timeout=400, env=dict(os.environ, **env))
    return done, [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


@pytest.mark.slow
def test_compilation_longer_than_the_timeout_is_not_a_hang(tmp_path):
    done, found = _run(tmp_path, "--timeout", "2", "--max-cases", "4", "--seed", "1", COMPILE_S="4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert found == []
    assert "worker timeout" not in done.stdout and "worker restarts 0" in done.stdout, done.stdout
    assert "slow compilation" not in done.stdout


@pytest.mark.slow
def test_compilation_past_its_own_budget_is_slow_compilation(tmp_path):
    done, found = _run(tmp_path, "--timeout", "2", "--compile-timeout", "1.5", "--max-cases", "3", "--seed", "1",
                       COMPILE_S="6")
    assert done.returncode == 0, done.stdout + done.stderr
    assert found == []
    assert "slow compilation, not a hang" in done.stdout
    assert "skipped: compiling took longer than the compile timeout" in done.stdout


@pytest.mark.slow
def test_a_hang_after_compilation_is_still_a_hang(tmp_path):
    done, found = _run(tmp_path, "--timeout", "2", "--max-cases", "60", "--seed", "3", "--max-findings", "1",
                       "--reruns", "1", "--minimise-budget", "5", "--shrink-budget", "10",
                       # (this target hangs inside its own run(), which a repro script's calls never reach)
                       "--no-verify-repros", COMPILE_S="0.5", HANG_5D="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert [f["oracle"] for f in found] == ["hang"]
