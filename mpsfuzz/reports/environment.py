"""``python -m torch.utils.collect_env``, captured on the machine that finds a bug (the
versions block of an upstream issue). Started in the background when a campaign starts,
so waiting for it costs nothing by the time a finding needs it."""
from __future__ import annotations

import subprocess
import sys

COLLECT_ENV_TIMEOUT_S = 120.0


class EnvironmentCapture:
    def __init__(self):
        self._text: str | None = None
        try:
            self._process = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "torch.utils.collect_env"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        except OSError as exc:
            self._process = None
            self._text = f"(collect_env could not run: {exc})"

    def text(self) -> str:
        if self._text is None and self._process is not None:
            try:
                out, _ = self._process.communicate(timeout=COLLECT_ENV_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                out = ""
            lines = [ln for ln in (out or "").splitlines() if ln.strip() != "Collecting environment information..."]
            self._text = "\n".join(lines).strip() or "(collect_env printed nothing)"
        return self._text or ""

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
