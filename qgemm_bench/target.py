"""What a GPU is, for the kernels and their dispatch: a Target, made once per
run by the harness (Target.from_device) and passed down, so no kernel asks
the device (or a table) which GPU it runs on.

The CPU (the Triton interpreter) is Target.cpu(): no compute capability, so
no GPU's tuned configs apply; its SM and shared-memory figures are those the
heuristics were written for (132 SMs, 227 KiB a program), so the
interpreter runs the same code paths as a GPU of that size.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache

import torch

CPU_NAME = "cpu"
# The interpreter's stand-in figures (see the module doc).
CPU_SMS = 132
CPU_SMEM_PER_BLOCK = 227 * 1024
CPU_L2_BYTES = 50 * 2**20


def slug(device_name: str) -> str:
    """A GPU's short name, how the config store names its entries:
    'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA H200' -> 'h200', names without
    a model token -> the name in lower case with _ for other characters."""
    found = re.search(r"\b([A-Z]+\d{2,4}[A-Z]*)\b", device_name)
    return (found.group(1) if found else re.sub(r"\W+", "_", device_name)).lower()


def gpu_slug(device: torch.device) -> str:
    """slug() of a CUDA device's name."""
    return slug(torch.cuda.get_device_name(device))


@dataclass(frozen=True)
class Target:
    name: str  # slug(device_name); "cpu" for the interpreter
    device_name: str
    capability: tuple[int, int] | None  # None: the CPU
    sms: int
    smem_per_block: int  # opt-in shared memory a program may take, bytes
    l2_bytes: int
    copy_GBps: float | None = None  # measured device-to-device copy (read + written)
    bf16_TFLOPs: float | None = None  # measured dense bf16 matmul rate

    @property
    def is_cpu(self) -> bool:
        return self.capability is None

    @property
    def cc(self) -> str | None:
        """The compute capability as text, "9.0" (None on the CPU)."""
        return None if self.capability is None else f"{self.capability[0]}.{self.capability[1]}"

    @classmethod
    def cpu(cls) -> Target:
        return cls(CPU_NAME, "cpu (Triton interpreter)", None, CPU_SMS, CPU_SMEM_PER_BLOCK, CPU_L2_BYTES)

    @classmethod
    def from_device(cls, device: torch.device, ceilings: dict | None = None) -> Target:
        """The Target of a torch device; ceilings: environment.measure_ceilings'
        {"copy_GBps", "bf16_matmul_TFLOPs"} where measured."""
        device = torch.device(device)
        if device.type != "cuda":
            return cls.cpu()
        p = torch.cuda.get_device_properties(device)
        smem = getattr(p, "shared_memory_per_block_optin", None) or p.shared_memory_per_block
        ceilings = ceilings or {}
        return cls(slug(p.name), p.name, (p.major, p.minor), p.multi_processor_count, int(smem),
                   int(p.L2_cache_size), ceilings.get("copy_GBps"), ceilings.get("bf16_matmul_TFLOPs"))

    def to_json(self) -> dict:
        d = asdict(self)
        d["capability"] = self.cc
        return d

    @classmethod
    def from_json(cls, d: dict) -> Target:
        """A Target from to_json()'s dict (a store entry's target.json)."""
        cap = d.get("capability")
        cap = tuple(int(x) for x in cap.split(".")) if isinstance(cap, str) else (tuple(cap) if cap else None)
        return cls(d["name"], d.get("device_name", d["name"]), cap, int(d["sms"]), int(d["smem_per_block"]),
                   int(d["l2_bytes"]), d.get("copy_GBps"), d.get("bf16_TFLOPs"))


@cache
def of(device: torch.device) -> Target:
    """Target.from_device without ceilings, once per device: for callers
    handed no Target (Python users, tests); a run makes its own."""
    return Target.from_device(device)
