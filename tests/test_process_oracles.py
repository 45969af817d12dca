"""The crash oracle reads faulthandler's dump of a real crash: its cleaned top frames key
the finding, and a crash with the CPU reference on the stack is eager CPU's bug (the
target ran the case first, and survived it), not the target's."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.oracles.process import check_crash, clean_frames, crashed_in_reference


def _dump_of_crash_in(function: str) -> tuple[int, str]:
    """A Python process that segfaults inside ``function`` (as a worker does, with
    faulthandler on): its return code and stderr."""
    script = textwrap.dedent(f"""
        import ctypes, faulthandler
        faulthandler.enable()
        def {function}(case):
            return ctypes.string_at(0)
        def judge(case):
            return {function}(case)
        judge(None)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


def test_a_crash_in_the_cpu_reference_blames_eager_cpu():
    returncode, stderr = _dump_of_crash_in("run_reference")
    assert returncode < 0 and "run_reference" in stderr
    assert crashed_in_reference(stderr)
    failure = check_crash(ProcessEvent(op="conv2d", target_name="mps", kind="died", returncode=returncode,
                                       stderr_tail=stderr))
    assert failure.blame == "cpu"
    assert "eager CPU (the reference)" in failure.title and "mps" not in failure.title


def test_a_crash_on_the_target_blames_the_target():
    returncode, stderr = _dump_of_crash_in("_run_dut")
    assert not crashed_in_reference(stderr)
    failure = check_crash(ProcessEvent(op="conv2d", target_name="mps", kind="died", returncode=returncode,
                                       stderr_tail=stderr))
    assert failure.blame == "target" and "on mps (SIG" in failure.title
    # keyed on the signal and the innermost frames, cleaned
    assert failure.dedup_key[:2] == ("crash", "SIGSEGV")
    assert failure.dedup_key[2:] == clean_frames(stderr, keep=2) and failure.dedup_key[2].endswith(":string_at")
