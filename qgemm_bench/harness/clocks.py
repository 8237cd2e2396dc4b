"""The SM clock and board power while a window is timed, from NVML (through
torch.cuda.clock_rate / power_draw, which need the nvidia-ml-py package).

Why: under sustained load the H100's 700 W limit moves the SM clock between
about 1.44 and 1.62 GHz (ws_gemm.md: 1620 -> 1500 MHz within the first 125 ms
of an int4 8192^2 M = 1024 loop), which is most of the 10-25% spread between
rounds and runs at large shapes. A row that records the clock its window ran
at lets a reader tell a slower kernel from a slower clock.

Without nvidia-ml-py, or where NVML does not answer, nothing is recorded.
"""

from __future__ import annotations

import statistics
import time

import torch

POLL_EVERY_S = 0.005  # ~20 polls in the default 100 ms window; one poll costs well under 1 ms


class Poller:
    """Polls the clock and power at most every POLL_EVERY_S; medians at the end."""

    def __init__(self, device: torch.device):
        self.device = device
        self.mhz: list[int] = []
        self.watts: list[float] = []
        self._last = -1.0
        self.failed = False

    def poll(self) -> None:
        now = time.perf_counter()
        if self.failed or now - self._last < POLL_EVERY_S:
            return
        self._last = now
        try:
            mhz, mw = torch.cuda.clock_rate(self.device), torch.cuda.power_draw(self.device)
        except Exception:  # NVML failing mid-window must not fail the timing: record nothing
            self.failed = True
            return
        self.mhz.append(mhz)
        self.watts.append(mw / 1e3)

    def poll_until(self, event: torch.cuda.Event) -> None:
        """Polls until `event` (the window's last) has completed."""
        while not event.query():
            self.poll()
            time.sleep(POLL_EVERY_S / 5)

    def medians(self) -> dict:
        if self.failed or not self.mhz:
            return {}
        return {"sm_mhz": float(statistics.median(self.mhz)), "power_w": float(statistics.median(self.watts))}


def poller(device: torch.device) -> Poller | None:
    """A Poller for this CUDA device, or None where NVML cannot be read."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.clock_rate(device), torch.cuda.power_draw(device)
    except Exception:  # no nvidia-ml-py (ModuleNotFoundError), no driver, an unsupported query
        return None
    return Poller(device)
