"""Imported once by the worker zygote (forkserver) so forked workers start warm.

The execution layer and the built-in op catalogue; the pool also preloads the module of
the function it is handed (``oracles/judge.py``, which loads every oracle). Never users'
kernel files (``run --kernels``): their code may touch the device when imported, and a
device context does not survive the fork (each worker imports them after it).
"""
# Dynamo before the catalogue: else a worker's first case imports it (~1.5 s inside the
# hang timeout), and the catalogue's input preparation is made never compiled from the
# start (generation/preparation.py) rather than through a wrapper.
import torch._dynamo  # noqa: F401

from ..generation import catalogue, kernels  # noqa: E402

kernels.defer_loading()   # first: nothing below, nor the modules preloaded after this one, imports them

from . import executor  # noqa: F401,E402

catalogue.all_ops()
