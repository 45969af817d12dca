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


def _dump_through(harness_file: str, caller: str) -> str:
    """faulthandler's dump of a crash in the op wrapper ``_sdpa`` (nn_losses.py), called
    from ``caller`` in a file named ``harness_file`` (how the worker reached it)."""
    script = textwrap.dedent(f"""
        import ctypes, faulthandler, pathlib, sys, tempfile
        faulthandler.enable()
        folder = pathlib.Path(tempfile.mkdtemp())
        (folder / "nn_losses.py").write_text("import os, signal\\ndef _sdpa():\\n    os.kill(os.getpid(), signal.SIGFPE)\\n")
        (folder / "{harness_file}").write_text("from nn_losses import _sdpa\\ndef {caller}():\\n    return _sdpa()\\n")
        sys.path.insert(0, str(folder))
        __import__("{harness_file[:-3]}").{caller}()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode < 0, done.stderr
    return done.stderr


def test_one_crash_reached_through_two_harness_paths_is_one_key():
    """An H200 run (docs/real-findings.md): CUDA's SDPA SIGFPE on empty inputs was filed twice, once per way the
    worker called the wrapper (the grad variant's ``executor.py:forward_backward``, the
    functional call's ``targets.py:run``). Keys read from such a corpus lose the frame too."""
    from mpsfuzz.oracles import Failure
    keys = set()
    for harness_file, caller in (("executor.py", "forward_backward"), ("targets.py", "run")):
        stderr = _dump_through(harness_file, caller)
        failure = check_crash(ProcessEvent(op="scaled_dot_product_attention", target_name="cuda", kind="died",
                                           returncode=-8, stderr_tail=stderr))
        assert f"{harness_file}\", line" in stderr   # the harness frame was in the dump
        assert failure.dedup_key == ("crash", "SIGFPE", "nn_losses.py:_sdpa"), failure.dedup_key
        keys.add(failure.dedup_key)
    assert len(keys) == 1
    old = Failure(oracle="crash", kind="crash", severity="critical", title="t", message="m",
                  dedup_key=("crash", "SIGFPE", "nn_losses.py:_sdpa", "executor.py:<lambda>"))
    assert Failure.from_json(old.to_json()).dedup_key == ("crash", "SIGFPE", "nn_losses.py:_sdpa")
    # a crash inside the harness itself keeps its frames (there are no others)
    assert clean_frames('  File "/x/mpsfuzz/execution/worker.py", line 3 in _answer\n', keep=2) == ("worker.py:_answer",)


def test_eager_cpus_crash_in_the_fault_target_and_in_the_reference_key_alike():
    """The fault target runs eager CPU: its ``run`` wrapper on the stack (as targets.py's
    own targets' ``run``) is the harness's, so a crash there and the same crash in the CPU
    reference have one key (triu into out= of its own negative view, a heap corruption,
    was filed twice). A fault's own effect function stays: that is where it crashes."""
    def dump(*frames):
        return "Fatal Python error: Aborted\n\n" + "".join(
            f'  File "/x/mpsfuzz/{path}", line 1 in {fn}\n' for path, fn in frames)
    in_target = dump(("generation/ops/linalg.py", "<lambda>"), ("testing/faults.py", "run"),
                     ("execution/executor.py", "run_side"))
    in_reference = dump(("generation/ops/linalg.py", "<lambda>"), ("execution/executor.py", "run_reference"))
    assert clean_frames(in_target, keep=2) == clean_frames(in_reference, keep=2) == ("linalg.py:<lambda>",)
    assert clean_frames(dump(("testing/faults.py", "_abort"), ("testing/faults.py", "run")), keep=2) \
        == ("faults.py:_abort",)
