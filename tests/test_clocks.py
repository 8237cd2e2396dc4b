"""The SM clock and board power recorded with each timed row (harness/clocks.py):
polling, failures that record nothing, pooling over rounds, the report's line."""

import pytest
import torch

from qgemm_bench.errors import InputError
from qgemm_bench.harness import clocks, report
from qgemm_bench.harness.assemble import assemble
from qgemm_bench.harness.results import OK, Row, frame, row_from_dict

CUDA = torch.device("cuda", 0)


@pytest.fixture
def nvml(monkeypatch):
    """torch.cuda's NVML readers, answering from `state` (clock MHz, power mW)."""
    state = {"mhz": iter([1620, 1500, 1500, 1485]), "mw": 650_000, "fail": False}

    def clock_rate(device=None):
        if state["fail"]:
            raise RuntimeError("NVML: GPU is lost")
        return next(state["mhz"])

    monkeypatch.setattr(torch.cuda, "clock_rate", clock_rate)
    monkeypatch.setattr(torch.cuda, "power_draw", lambda device=None: state["mw"])
    monkeypatch.setattr(clocks, "POLL_EVERY_S", 0.0)
    return state


def test_the_medians_of_the_polls(nvml):
    nvml["mhz"] = iter([1700, 1620, 1500, 1485])  # the probe's read (1700) is not a sample
    p = clocks.poller(CUDA)
    for _ in range(3):
        p.poll()
    assert p.mhz == [1620, 1500, 1485] and p.medians() == {"sm_mhz": 1500.0, "power_w": 650.0}


def test_polls_are_spaced(nvml, monkeypatch):
    monkeypatch.setattr(clocks, "POLL_EVERY_S", 60.0)
    p = clocks.Poller(CUDA)
    for _ in range(5):
        p.poll()
    assert p.mhz == [1620]


def test_nvml_failing_mid_window_records_nothing(nvml):
    p = clocks.poller(CUDA)
    p.poll()
    nvml["fail"] = True
    p.poll()
    assert p.failed and p.medians() == {}


def test_no_poller_without_nvml_or_on_cpu(nvml):
    assert clocks.poller(torch.device("cpu")) is None
    nvml["fail"] = True
    assert clocks.poller(CUDA) is None


def test_poll_until_the_windows_last_event(nvml):
    class Event:  # completes on its third query
        n = 0

        def query(self):
            self.n += 1
            return self.n > 2

    p = clocks.poller(CUDA)
    p.poll_until(Event())
    assert p.mhz == [1500, 1500]


def row(us, mhz, rnd=0, M=1024):
    return rnd, Row(op="int4_gemm", backend="triton", M=M, K=8192, N=8192, dtype="bfloat16",
                    settings={"group_size": 128}, device="cuda:0", timing="graph", status=OK, rel_err=1e-3,
                    samples_us=[us, us], p50_us=us, p20_us=us, p80_us=us, sm_mhz=mhz,
                    power_w=None if mhz is None else 690.0 + rnd)


def test_rounds_pool_into_the_median_clock_and_each_rounds():
    (r,) = assemble([row(180.0, 1620.0, 0), row(190.0, 1500.0, 1), row(191.0, 1485.0, 2)], {"settings": {}})
    assert r.round_sm_mhz == [1620.0, 1500.0, 1485.0] and r.sm_mhz == 1500.0 and r.power_w == 691.0
    assert r.round_p50_us == [180.0, 190.0, 191.0]
    again = row_from_dict(r.to_dict())
    assert again.round_sm_mhz == r.round_sm_mhz and frame([again])["sm_mhz"].tolist() == [1500.0]
    # One round without a clock: the row claims none.
    (r,) = assemble([row(180.0, 1620.0, 0), row(190.0, None, 1)], {"settings": {}})
    assert r.sm_mhz is None and r.power_w is None and r.round_sm_mhz == []


def test_rows_written_before_clocks_still_load():
    d = row(1.0, None)[1].to_dict()
    for k in ("sm_mhz", "power_w", "round_sm_mhz"):
        del d[k]
    assert row_from_dict(d).sm_mhz is None
    with pytest.raises(InputError, match="round_sm_mhz"):
        row_from_dict({**d, "round_sm_mhz": [1500, "fast"]})


def test_the_report_gives_the_clock_range():
    rows = assemble([row(180.0, 1620.0), row(50.0, 1485.0, M=256), row(9.0, None, M=16)], {"settings": {}})
    assert report.clocks_line(rows) == ("SM clock 1485-1620 MHz, board power 690-690 W over 2 rows "
                                        "(each row's in results.csv: sm_mhz, power_w)")
    assert report.clocks_line(rows[2:]) == ""
