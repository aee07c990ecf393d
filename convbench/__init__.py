"""convbench: benchmark and cache-profile CNN convolution kernels on CPUs."""

__version__ = "0.1.0"
