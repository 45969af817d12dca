"""Imported once by the worker zygote (forkserver) so forked workers start warm."""
from . import executor  # noqa: F401
from ..generation import catalogue  # noqa: F401
from ..oracles import all_oracles
import torch._dynamo  # noqa: F401,E402  (else a worker's first case imports it: ~1.5 s inside the hang timeout)

catalogue.all_ops()
all_oracles()
