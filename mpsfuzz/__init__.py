"""mpsfuzz: a correctness fuzzer and differential tester for PyTorch's MPS backend."""
__version__ = "0.1.0"

# The users' kernel API (``@mpsfuzz.kernel``, ``mpsfuzz.tensor``), imported on first
# use: ``import mpsfuzz`` alone stays light (workers import it before torch is needed).
PUBLIC_API = ("kernel", "tensor")


def __getattr__(name: str):
    if name in PUBLIC_API:
        from .generation import kernels
        return getattr(kernels, name)
    raise AttributeError(f"module 'mpsfuzz' has no attribute {name!r}")
