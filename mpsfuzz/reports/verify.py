"""Run a repro script in a fresh interpreter on its target and judge whether it shows
the finding: the expected assertion, error, signal or timeout."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..execution.targets import BUILTIN
from ..scratch import scratch_dir


# What the draft of an upstream issue quotes of a verification run's output.
OUTPUT_KEEP_CHARS = 4000


@dataclass(frozen=True)
class Verdict:
    reproduced: bool | None   # None: the script could not run here (says nothing either way)
    detail: str
    output: str = ""      # stdout then stderr of the run, the end of it kept


# What an interpreter prints when the script cannot run on this machine at all: torch is
# missing, or the device the script names is not here. Not a verdict on the finding.
_CANNOT_RUN = ("No module named 'torch'", "Torch not compiled with CUDA enabled", "Found no NVIDIA driver",
               "no CUDA GPUs are available", "CUDA driver version is insufficient",
               "MPS backend is not available", "The MPS backend is supported on MacOS",
               "PyTorch code is not compiled with MPS enabled")


def _cannot_run(returncode: int | None, stderr: str) -> str | None:
    """Why the script could not run here, or None when it ran (whatever it showed)."""
    from .shim import CANNOT_LOAD_TARGET
    if returncode == CANNOT_LOAD_TARGET and "mpsfuzz shim: cannot load the target" in stderr:
        return _last_line(stderr).removeprefix("mpsfuzz shim: ")
    if returncode and returncode > 0:
        for phrase in _CANNOT_RUN:
            if phrase in stderr:
                return f"{phrase} ({_last_line(stderr)})"
    return None


def _without_shim_frames(stderr: str, script_path: str) -> str:
    """The traceback as running the script directly would print it: the shim's and
    runpy's frames are dropped and the temporary path is the script's own name."""
    out, skipping = [], False
    for line in stderr.splitlines():
        if line.startswith('  File "'):
            skipping = "<frozen runpy>" in line or "mpsfuzz/reports/shim.py" in line or "mpsfuzz\\reports\\shim.py" in line
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            out.append(line.replace(script_path, "repro.py"))
    return "\n".join(out)


def _joined(stdout: str, stderr: str, script_path: str = "") -> str:
    stderr = _without_shim_frames(stderr or "", script_path) if script_path else (stderr or "")
    text = (stdout or "").rstrip() + ("\n" if stdout and stderr else "") + stderr.rstrip()
    return text[-OUTPUT_KEEP_CHARS:]


def command_for(script_path: Path, target_spec: str) -> list[str]:
    """Built-in targets are torch devices (or torch.compile on one): the script runs as
    it is. Any other target runs through the shim."""
    if target_spec in BUILTIN:
        return [sys.executable, str(script_path)]
    return [sys.executable, "-m", "mpsfuzz.reports.shim", target_spec, str(script_path)]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else ""


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def judge(expect: dict, returncode: int | None, stdout: str, stderr: str) -> Verdict:
    """Whether a run shows what ``expect`` says (a repro's ``Script.expect``): its
    ``outcome``; for an assertion, its ``message`` where given (a script of eager CPU's
    bug fails with one that names CPU, not the device); for a signal, the ``stdout`` the
    script prints before it (the device's calls returned: eager CPU's calls killed it);
    and ``cpu_alone``, the line a finding of both backends' script prints once eager CPU
    alone, in a child interpreter, showed the symptom too."""
    outcome = expect.get("outcome")
    if returncode is not None and expect.get("cpu_alone") and expect["cpu_alone"] not in stdout:
        shown = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("eager CPU alone:")), "")
        return Verdict(False, f"eager CPU alone does not show it ({shown or 'no word of it'})")
    if returncode is None:
        if outcome == "timeout":
            return Verdict(True, "the call did not return (killed after the time limit)")
        if _fault_shown(expect, stdout, stderr):
            return Verdict(True, f"{_last_error_line(stderr)}; then the process hung")
        return Verdict(False, "the script did not finish within the time limit")
    if outcome == "timeout":
        return Verdict(False, f"the script finished (exit {returncode}): the call returns")
    if returncode < 0:
        name = _signal_name(returncode)
        if outcome == "signal" and (not expect.get("signal") or expect["signal"] == name):
            if expect.get("stdout") and expect["stdout"] not in stdout:
                return Verdict(False, f"the process died with {name} before printing {expect['stdout']!r}")
            return Verdict(True, f"the process died with {name}")
        if _fault_shown(expect, stdout, stderr):
            return Verdict(True, f"{_last_error_line(stderr)}; then the process died with {name}")
        return Verdict(False, f"the process died with {name}, not as the finding says")
    if outcome == "signal":
        return Verdict(False, f"the process did not crash (exit {returncode}: {_last_line(stderr) or 'no error'})")
    if returncode == 0:
        return Verdict(False, "the script ran to the end without showing the bug")
    last = _last_line(stderr)
    if outcome == "assertion":
        if "AssertionError" in stderr and expect.get("message") and expect["message"] not in stderr:
            return Verdict(False, f"another assertion failed: {last}")
        if "AssertionError" in stderr:
            return Verdict(True, last)
        return Verdict(False, f"it failed differently: {last}")
    if outcome == "raises":
        why_not = _not_raised_as_expected(expect, stdout, stderr)
        return Verdict(why_not is None, why_not or (_last_error_line(stderr) if expect.get("fault") else last))
    return Verdict(False, f"unknown expectation {outcome!r}")


def _fault_shown(expect: dict, stdout: str, stderr: str) -> bool:
    """A device fault's script printed the fault's error, whatever became of the process
    after it: a sticky CUDA error can abort the interpreter at exit (std::terminate while
    the context is freed) or hang it (issue 37: a fault that reproduces alone in a fresh
    process is verified)."""
    return expect.get("outcome") == "raises" and bool(expect.get("fault")) \
        and _not_raised_as_expected(expect, stdout, stderr) is None


def _not_raised_as_expected(expect: dict, stdout: str, stderr: str) -> str | None:
    """Why the run's output does not show the error a "raises" expectation names, or None
    where it does."""
    last = _last_line(stderr)
    wanted_type, wanted_message = expect.get("type"), expect.get("message", "")
    if wanted_type and f"{wanted_type}:" not in stderr:
        return f"it raised something else: {last}"
    if wanted_message and wanted_message.split("\n")[0][:40] not in stderr:
        return f"another message: {last}"
    if expect.get("stdout") and expect["stdout"] not in stdout:
        return "the device call itself failed"
    return None


def _last_error_line(stderr: str) -> str:
    """The last line of stderr that names an error (what a dying runtime prints after it
    is no error of the script's)."""
    lines = [ln.strip() for ln in stderr.splitlines() if re.match(r"\s*[\w.]*(Error|Exception)\b", ln)]
    return lines[-1][:200] if lines else _last_line(stderr)


def run_and_judge(script, *, target_spec: str, timeout_s: float = 60.0, env: dict | None = None,
                  warm: bool = False) -> Verdict:
    """Write ``script`` (a repro.Script) to a temporary folder and run it there in a fresh
    interpreter; the current directory stays importable for ``module:attr`` targets.
    ``warm``: in a process forked from the workers' zygote instead (torch imported, no
    op run: what a fresh interpreter is, without seconds of imports per script; the
    campaign's verifications, issue 37)."""
    environment = dict(os.environ if env is None else env)
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), environment.get("PYTHONPATH", "")) if p)
    environment.setdefault("PYTHONFAULTHANDLER", "1")
    with scratch_dir("mpsfuzz-repro-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(script.text)
        command = command_for(path, target_spec)
        try:
            if warm:
                returncode, out, err = run_forked(command, tmp, environment, timeout_s)
            else:
                returncode, out, err = _run_fresh(command, tmp, environment, timeout_s)
        except OSError as exc:  # no interpreter to run it with
            return Verdict(None, f"not verified here: cannot start the interpreter: {exc}")
    if returncode is None:      # past the time limit
        verdict = judge(script.expect, None, out, err)
        return Verdict(verdict.reproduced, verdict.detail, _joined(out, err, str(path)))
    output = _joined(out, err, str(path))
    why = _cannot_run(returncode, err)
    if why is not None:
        return Verdict(None, f"not verified here: {why}", output)
    verdict = judge(script.expect, returncode, out, err)
    if returncode < 0:
        output += f"\n(the process was killed by {_signal_name(returncode)})"
    return Verdict(verdict.reproduced, verdict.detail, output)


def _run_fresh(command: list[str], cwd: str, env: dict, timeout_s: float) -> tuple[int | None, str, str]:
    """(return code, or None past ``timeout_s``; stdout; stderr) of ``command`` run in a
    fresh interpreter."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL,
                              # its own session: a Ctrl-C at the terminal stops mpsfuzz
                              # (which then kills this run), never makes a script "fail"
                              start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, out, err
    return done.returncode, done.stdout, done.stderr


def run_forked(command: list[str], cwd: str, env: dict, timeout_s: float) -> tuple[int | None, str, str]:
    """As _run_fresh, in a process forked from the workers' zygote (a forkserver that
    has imported torch and run no op): ``command`` is what command_for gives, run as
    that interpreter would run it. Where processes are spawned (no forkserver), the
    child is a fresh interpreter anyway."""
    from ..execution.worker import zygote_context
    out_path, err_path = Path(cwd) / "stdout.txt", Path(cwd) / "stderr.txt"
    process = zygote_context().Process(target=_script_child, args=(command[1:], cwd, env, str(out_path), str(err_path)),
                                 daemon=True)
    process.start()
    process.join(timeout_s)
    if process.is_alive():
        process.kill()
        process.join(5)
        returncode = None
    else:
        returncode = process.exitcode
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""   # noqa: E731
    return returncode, read(out_path), read(err_path)


def _script_child(argv: list[str], cwd: str, env: dict, out_path: str, err_path: str) -> None:
    """The forked child: ``argv`` is ``[SCRIPT]`` or ``[-m, mpsfuzz.reports.shim, TARGET,
    SCRIPT]``, run as ``python`` would (its own session, the script's folder first on
    sys.path, the environment given, stdout and stderr to files, faulthandler on, an
    uncaught exception's traceback from the script's frames and exit status 1)."""
    import faulthandler
    import runpy
    import traceback
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, out_path), (2, err_path)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    faulthandler.enable()
    script = argv[-1]
    sys.path[:0] = [os.path.dirname(script)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.argv = [script]
    code = 0
    try:
        if argv[0] == "-m":
            from .shim import main as shim_main
            code = shim_main(argv[2:])
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException as exc:  # noqa: BLE001 - what an interpreter prints and exits 1 for
        frames = traceback.extract_tb(exc.__traceback__)
        ours = next((i for i, f in enumerate(frames) if f.filename == script), 0)
        sys.stderr.write("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames[ours:]))
                         + "".join(traceback.format_exception_only(type(exc), exc)))
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
