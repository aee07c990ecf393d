"""The worker protocol: every message and the job survive the trip through JSON."""

from __future__ import annotations

import pytest

from convbench.harness.protocol import (
    CaseSpec,
    Counts,
    Enter,
    Hello,
    Job,
    ProtocolError,
    Result,
    Settings,
    decode,
)
from convbench.status import Status


@pytest.mark.parametrize("message", [
    Hello({"threads": 2, "blas": [{"api": "openblas"}]}),
    Settings({"numba_threading_layer": "omp"}),
    Enter(None, "calibrate"),
    Enter("conv|direct/nchw|t1|vauto", "time"),
    Result("c", Status.OK, "", {"prepare_s": 0.1}, [1e-3, 2e-3], [1e-4, 1e-4], loops=7),
    Result("c", Status.FAIL, "error 4 is 5x the bound", {"max_abs_err": 4.0}),
    Counts("c", {"sim_ir": 650.0}),
])
def test_messages_round_trip(message):
    back = decode(message.encode())
    assert back == message and type(back) is type(message)


def test_result_status_is_a_status():
    result = decode('{"type": "result", "case": "c", "status": "timeout", "reason": "r", '
                    '"figures": {}}')
    assert result.status is Status.TIMEOUT


@pytest.mark.parametrize("line", ['{"type": "nope"}', "not json", '{"case": "c"}',
                                  '{"type": "enter", "case": "c"}',
                                  '{"type": "result", "case": "c", "status": "pass", '
                                  '"reason": "", "figures": {}}'])
def test_unreadable_lines_are_protocol_errors(line):
    with pytest.raises(ProtocolError, match="unreadable worker message"):
        decode(line)


def test_job_round_trip():
    job = Job(threads=2, vector_width="512", problem={"mb": 1, "name": "x"},
              cases=(CaseSpec("a", "im2col", "nhwc", {"gemm": "own"}),),
              timing={"min_time": 0.01, "values": 5, "warmups": 1, "timeout": 60.0},
              counters="sim", count_only=True, seed=3)
    assert Job.from_json(job.to_json()) == job
