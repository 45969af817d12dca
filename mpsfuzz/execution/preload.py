"""Imported once by the worker zygote (forkserver) so forked workers start warm.

The execution layer and the op catalogue; the pool also preloads the module of the
function it is handed (``oracles/judge.py``, which loads every oracle).
"""
from ..generation import catalogue
from . import executor  # noqa: F401
import torch._dynamo  # noqa: F401,E402  (else a worker's first case imports it: ~1.5 s inside the hang timeout)

catalogue.all_ops()
