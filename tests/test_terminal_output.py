"""What a narrow terminal and a CI log see (issue 15, points 1-2): at 80 columns each
finding is one line (status, op, variant, oracle, short why) with its explanation and
file indented below; logs get no carriage returns or escape codes and one line per
event; Ctrl-C ends a run with its summary, every finding kept, exit 130."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from rich.console import Console

from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import CampaignFinished, Stats
from mpsfuzz.reports.console import ConsoleReporter

from test_bugs import finding as make_finding

LONG = ("wrong values only when `input` is non-contiguous (gapped) and inputs have 4 or more dims; "
        "contiguous inputs pass; all float dtypes; every dtype class tried fails (float, complex)")


def _findings():
    found = []
    for op, oracle, kernel in (("linalg.eig", "variants", "aten::linalg_eig.default"),
                               ("interpolate_bicubic", "values", "aten::_upsample_bicubic2d_aa.default"),
                               ("scaled_dot_product_attention", "errors", "aten::_efficient_attention_forward")):
        f = make_finding(op, oracle, conditions=("layout:0", op), kernel=kernel)
        f.explanation = {"text": LONG}
        found.append(f)
    return found


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    store = Corpus(root)
    for f in _findings():
        store.record(f)
    return root


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_a_terminal(*args, columns: int, timeout=120, raw: bool = False, env_extra=None) -> tuple[int, str]:
    """Run ``mpsfuzz ARGS`` with stdout on a pseudo-terminal ``columns`` wide (and
    COLUMNS saying so): what a user sees, escape codes removed (kept with ``raw``)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns), TERM="xterm-256color", **(env_extra or {}))
    env.pop("LINES", None)
    if not env_extra or "NO_COLOR" not in env_extra:
        env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", *map(str, args)], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:   # the other end closed
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=10)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return code, text if raw else _ANSI.sub("", text)


def _one_line_each(out: str, findings) -> None:
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), max(lines, key=len)
    for f in findings:
        assert any(f.op in line and f.oracle in line for line in lines), (f.op, out)


@pytest.mark.slow
def test_corpus_list_and_bugs_at_80_columns_keep_each_finding_on_one_line(tmp_path):
    root = _corpus(tmp_path)
    for extra in ([], ["--by", "bug"]):
        code, out = _on_a_terminal("corpus", "list", root, *extra, columns=80)
        assert code == 0, out
        _one_line_each(out, _findings())
        assert "┃" not in out        # no table squeezed to a word per cell
        assert "contiguous inputs pass" in out   # the explanation, below its line
    code, out = _on_a_terminal("report", root, "--format", "terminal", columns=80)
    assert code == 0, out
    _one_line_each(out, _findings())


def test_a_wide_terminal_keeps_the_full_table(tmp_path):
    code, out = _on_a_terminal("corpus", "list", _corpus(tmp_path), columns=160)
    assert code == 0 and "┃" in out and "linalg.eig" in out


def test_run_summary_at_80_columns_lists_each_finding_on_one_line():
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=80, color_system=None), live=False)
    found = _findings()
    reporter.summary(CampaignFinished(Stats(), tuple((f, Path(f"{f.op}.json"), True) for f in found), "budget"))
    _one_line_each(out.getvalue(), found)
    assert "┃" not in out.getvalue()


@pytest.mark.slow
def test_a_log_gets_plain_lines_and_ctrl_c_exits_130_keeping_the_finding(tmp_path):
    """One run, piped (a CI log) and interrupted once its first finding is on disk."""
    corpus = tmp_path / "c"
    env = dict(os.environ, MPSFUZZ_FAULTS="sigmoid_noncontig", PYTHONUNBUFFERED="1")
    env.pop("COLUMNS", None)
    proc = subprocess.Popen([sys.executable, "-m", "mpsfuzz", "run", "--ops", "sigmoid",
                             "--target", "mpsfuzz.testing.faults:target", "--budget", "200s",
                             "--corpus", str(corpus), "--seed", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not [p for p in corpus.glob("*.json")
                                                   if not p.name.startswith("inflight")]:
            time.sleep(0.25)
        found = [p for p in corpus.glob("*.json") if not p.name.startswith("inflight")]
        assert found, "no finding within 150 s"
        os.killpg(proc.pid, signal.SIGINT)    # as a terminal's Ctrl-C: the whole group
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "\r" not in out and "\x1b" not in out
    assert "done (interrupted)" in out
    assert all(p.exists() for p in found)
    for path in found:
        assert path.name in out, out     # the summary lists what is on disk
    events = [line for line in out.splitlines() if line.lstrip().startswith("finding [")]
    assert events and all("->" in line for line in events)   # one line per finding event


def test_doctor_names_torch_the_chosen_target_and_the_corpus(tmp_path, capsys):
    import torch

    from mpsfuzz.cli import main
    from mpsfuzz.targets import best_available
    root = _corpus(tmp_path)
    code = main(["doctor", "--corpus", str(root)])   # in this process: no fresh interpreter to start
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"torch {torch.__version__}" in out
    chosen = next(line for line in out.splitlines() if "<- `mpsfuzz run` tests this one" in line)
    assert best_available() in chosen and "available" in chosen
    assert "OpInfo database" in out and "3 finding(s)" in out
    assert "CPU reference lacks" in out


def test_issue_drafts_point_to_doctor():
    from mpsfuzz.reports.issue import TOOL_NOTE
    assert "mpsfuzz doctor" in TOOL_NOTE


@pytest.mark.slow
def test_no_color_is_honoured_on_a_terminal(tmp_path):
    root = _corpus(tmp_path)
    colour = re.compile(r"\x1b\[[0-9;]*(3[0-9]|9[0-7])[;m]")
    code, out = _on_a_terminal("corpus", "list", root, columns=160, raw=True)
    assert code == 0 and colour.search(out), "expected colour on a terminal"
    code, out = _on_a_terminal("corpus", "list", root, columns=160, raw=True, env_extra={"NO_COLOR": "1"})
    assert code == 0 and "linalg.eig" in out and not colour.search(out)
