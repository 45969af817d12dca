"""mpsfuzz: a correctness fuzzer and differential tester for PyTorch's MPS backend."""
__version__ = "0.1.0"
