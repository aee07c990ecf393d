"""This host's limits: FP32 peak, measured clock and memory bandwidth, stored per host.

``convbench machine`` measures them (:mod:`.measure`; the bandwidth as a curve over
working-set sizes, :mod:`.bandwidth`), :mod:`.store` keeps them under the user cache
directory and looks figures up in them, and :mod:`.first_use` hands them to ``run``
(measuring the quick profile first on a host with none) so GFLOP/s becomes a share of peak
and of the roofline bound at each layer's footprint.
"""
