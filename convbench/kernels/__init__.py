"""Conv kernels: the float64 reference, layout converters and one module per algorithm family.

Every algorithm module exposes ``ALGORITHMS``, a list of :class:`~convbench.kernels.base.Algorithm`;
:mod:`convbench.kernels.registry` discovers them, so adding a family means adding a module.
"""
