"""This host's limits: FP32 peak, measured clock and memory bandwidth, stored per host.

``convbench machine`` measures them (:mod:`.measure`), :mod:`.store` keeps them under the
user cache directory, and :func:`.store.machine_limits` hands them to ``run`` so GFLOP/s
becomes a share of peak and the report can draw a roofline.
"""
