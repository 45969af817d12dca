"""collect_env's output is captured once per install and day, not once per campaign."""
from __future__ import annotations

import os
import sys
import time

from mpsfuzz.reports.environment import EnvironmentCapture, install_key


def printing(text: str) -> tuple:
    """A stand-in for collect_env that prints its banner and ``text``."""
    return (sys.executable, "-c", f"print('Collecting environment information...'); print({text!r})")


def test_the_first_capture_runs_collect_env_and_caches_its_output(tmp_path):
    first = EnvironmentCapture(command=printing("PyTorch version: 9.9"), cache=tmp_path)
    assert not first.from_cache
    assert first.text() == "PyTorch version: 9.9"
    cached = tmp_path / f"collect_env-{install_key()}.txt"
    assert cached.read_text() == "PyTorch version: 9.9"
    # The next campaign on this install reads it: a command that would print otherwise never runs.
    second = EnvironmentCapture(command=printing("something else"), cache=tmp_path)
    assert second.from_cache and second.text() == "PyTorch version: 9.9"


def test_an_old_capture_is_taken_again(tmp_path):
    EnvironmentCapture(command=printing("old"), cache=tmp_path).text()
    cached = tmp_path / f"collect_env-{install_key()}.txt"
    day_ago = time.time() - 25 * 3600
    os.utime(cached, (day_ago, day_ago))
    fresh = EnvironmentCapture(command=printing("new"), cache=tmp_path)
    assert not fresh.from_cache and fresh.text() == "new"
    assert cached.read_text() == "new"


def test_a_failed_or_empty_run_is_reported_and_not_cached(tmp_path):
    failing = (sys.executable, "-c", "import sys; print('half'); sys.exit(1)")
    assert EnvironmentCapture(command=failing, cache=tmp_path).text() == "half"
    assert EnvironmentCapture(command=printing(""), cache=tmp_path).text() == "(collect_env printed nothing)"
    assert not list(tmp_path.glob("collect_env-*"))
    missing = EnvironmentCapture(command=("/nonexistent/collect_env",), cache=tmp_path)
    assert missing.text().startswith("(collect_env could not run")


def test_an_unwritable_cache_still_gives_the_output(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    capture = EnvironmentCapture(command=printing("PyTorch version: 9.9"), cache=blocked / "cache")
    assert capture.text() == "PyTorch version: 9.9"


def test_the_cache_follows_mpsfuzz_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MPSFUZZ_CACHE_DIR", str(tmp_path / "here"))
    EnvironmentCapture(command=printing("PyTorch version: 9.9")).text()
    assert (tmp_path / "here" / f"collect_env-{install_key()}.txt").exists()
