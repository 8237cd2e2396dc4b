"""`qgemm-bench tune` (and `python runner.py tune`): time the kernels'
candidate configs on this GPU and write its config store entry. The
module's HELP is the user's page (docs/tuning.md says more)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from qgemm_bench.errors import InputError, one_line
from qgemm_bench.harness import args as types

LAYER_K = 128  # --layers: K a multiple of the tables' int4 group and K block

HELP = """\
bring up a GPU from nothing (every operator, both kernel families):

  qgemm-bench tune --dry-run                 # what would be tuned, and how long it should take
  qgemm-bench tune                           # one GPU: at most --budget-s (default 24.2 min)
  NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 runner.py tune   # two GPUs (default 14 min)
  qgemm-bench tune --resume                  # after an interruption: only what is not written yet
  qgemm-bench tune --stop-after-s 500; qgemm-bench tune --resume --stop-after-s 500; ...
                                             # where a command may run 10 minutes at most

what gets written: qgemm_bench/configs/<gpu>/ (or --store DIR/<gpu>/), the store the
benchmarks read: weight_only.json (the Triton weight-only GEMM's split and fused
configs per format, layer (the Llama presets' or --layers') and M, with PDL and
the warp-specialized tiles), split_k.json (the Triton split-K GEMM's atomic and
deterministic configs per skinny shape), helion.json (the Helion kernels' per
bucket) and target.json (what the GPU is: SMs, shared memory, L2, measured copy
bandwidth and bf16 rate). Each family file
carries a "provenance" object (commit, date, the commands of every piece, rounds,
versions, budget, whether every unit was timed, how many were cut short). Every
entry is written the moment it is tuned (and journalled in <gpu>/.tune/), so an
interrupted tune loses nothing: --resume skips what the unfinished tune wrote; a
finished tune deletes the journal. Commit the folder to make the entry everyone's.

how long: a bring-up from nothing took 20.9 minutes of tuning on one H200 (7.9 +
9.0 + 4.0 in three commands; the default budget is 24.2), 10.3 minutes of wall time
on two under torchrun (8.3 + 1.6 of tuning, in two commands; results/h200x2/README.md)
and 9.6 on four (results/h200/README.md), plus start-up. A GPU with a tuned
entry of its compute capability in the store (the H100's for an H200) times only
the candidates that won there, at each M (--full times every candidate of the
kernels' pools: several times longer); each unit (one table entry) gets its share
of the budget by expected cost, so the command ends on time and the entries it
reached last are tuned from fewer candidates.

every candidate is checked against the reference before it is timed; a wrong or
failing config is never chosen. Timing is the runner's: a CUDA graph over
rotating input copies larger than 2x L2, p50, two rounds (the second reversed, of
the fastest three).

exit status: 0 every planned unit tuned, 1 some unit had no config that ran right,
or the tune stopped (a stalled kernel, a lost CUDA context: the entries so far are
written; --resume continues), 2 bad usage (nothing is tuned or written).
CPU test mode: qgemm-bench tune --device cpu ... (float16, the
Triton interpreter; writes <store>/cpu/, for tests only)."""


def parser() -> argparse.ArgumentParser:
    from qgemm_bench.tuning import plan

    p = types.Parser(prog=types.prog("tune"), description="Tune this GPU's kernel configs and write its "
                     "config store entry (every operator and kernel family by default).",
                     epilog=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="all", help=f"operator: {', '.join(plan.OPS)} or all (default all)")
    p.add_argument("--backends", default=",".join(plan.BACKENDS), metavar="A,B",
                   help="kernel families to tune: triton, helion or both (default triton,helion)")
    p.add_argument("--budget-s", type=types.positive_seconds, metavar="S",
                   help=f"wall-clock budget of the whole tune in seconds (default: 1.5x the plan's expected time, at "
                        f"most {plan.BUDGET_S[1]:g} on one GPU and {plan.BUDGET_S[2]:g} per rank on two or more; a "
                        "candidate's check or timing in flight when it runs out finishes first, so a tune can end "
                        "a few seconds past it)")
    p.add_argument("--shape-budget-s", type=types.positive_seconds, metavar="S",
                   help="at most this many seconds per unit (one table entry: a shape) (default: its share of the "
                        "budget by expected cost)")
    p.add_argument("--stop-after-s", type=types.positive_seconds, metavar="S",
                   help="end this run after S seconds, the units' shares unchanged (a machine that limits a "
                        "command's time: `tune --resume` goes on with the rest of the budget)")
    p.add_argument("--resume", action="store_true",
                   help="skip the units this GPU's unfinished tune already wrote (its journal in <gpu>/.tune/); "
                        "give the options its plan came from as its first run did (--op, --backends, --formats, "
                        "--ms, --layers, --groups, --full, --helion-*; the budget's may differ)")
    p.add_argument("--store", metavar="DIR", help="the config store to write (default: the package's "
                   "qgemm_bench/configs/)")
    p.add_argument("--ms", metavar="M,M", help="weight-only M to tune (default: every M of the tables: split "
                   "1,16,32,64, fused 1..4096, Helion 1..512; given, Helion's buckets at these M up to its "
                   "fused path's 1024)")
    p.add_argument("--formats", default="int4,nvfp4", metavar="F,F",
                   help="weight-only formats: int4, nvfp4 or both (default both)")
    p.add_argument("--groups", default="", metavar="G,G",
                   help="also give int4 fused entries their own warp-specialized config at these group sizes: "
                        "32, 64, channel (default none: group 128's configs serve every group)")
    p.add_argument("--layers", metavar="KxN,...",
                   help="tune the weight-only entries of these layers (K x N: in and out features) instead of the "
                        "Llama presets' (e.g. a tensor-parallel shard or an lm_head the model bench runs; without "
                        "an entry a shape takes the nearest layer's config); Triton's and, with --backends helion, "
                        "Helion's buckets; split-K's shapes stay its preset's")
    p.add_argument("--helion-layers", action="store_true",
                   help="tune Helion's weight-only buckets at every layer of the llama preset (Llama-3-8B and 70B; "
                        "K x N as the default run's), not only at K = N = 8192: a bucket of its own then serves "
                        "each default-run shape instead of the Triton table's config, untimed in Helion (not in "
                        "the bring-up's default plan: about 10 s a bucket)")
    p.add_argument("--helion-variants", action="store_true",
                   help="Helion's fused units also time the TMA and persistent (L2-grouped) variants of their "
                        "first candidate (candidates.helion_fused_variants: up to 4 more a unit; not in the "
                        "bring-up's default plan)")
    p.add_argument("--full", action="store_true",
                   help="time every candidate of the pools, not only those that won on the nearest tuned GPU")
    p.add_argument("--dry-run", action="store_true", help="list what would be tuned and the expected time; "
                   "tune nothing (no GPU needed)")
    p.add_argument("--like", metavar="NAME", help="--dry-run without a GPU: plan as on the GPU of store entry "
                   "NAME (its target.json)")
    p.add_argument("--device", default="auto", help="auto (default), cuda, cuda:N, or cpu (a test run on the "
                   "Triton interpreter, which it turns on)")
    p.add_argument("--stall-timeout", type=types.stall_seconds, default=300.0, metavar="S",
                   help="stop (exit 1, the entries so far written) when one candidate's check or timing takes "
                        "more than S seconds, e.g. a kernel that never finishes (default 300; 0: off)")
    return p


# The options a tune's plan comes from, by flag: a --resume must give the same ones (the budget's may differ).
PLAN_FLAGS = {"ops": "--op", "backends": "--backends", "formats": "--formats", "ms": "--ms", "layers": "--layers",
              "groups": "--groups", "full": "--full", "helion_layers": "--helion-layers",
              "helion_variants": "--helion-variants"}


def plan_options(args) -> dict:
    """What the plan was made from (options' normalized values), as JSON."""
    return {"ops": sorted(args.ops), "backends": sorted(args.backend_list), "formats": sorted(args.format_list),
            "ms": sorted(args.m_set) if args.m_set else None,
            "layers": [list(kn) for kn in sorted(args.layer_set)] if args.layer_set else None,
            "groups": sorted(map(str, args.group_list)), "full": bool(args.full),
            "helion_layers": bool(args.helion_layers), "helion_variants": bool(args.helion_variants)}


def check_resume(first: dict | None, now: dict) -> None:
    """InputError where the unfinished tune was planned from other options
    (before, --resume with other --ms or --layers went on silently: the units
    written were not the plan's, the rest of the old plan was never tuned)."""
    if first is None:  # a journal from before plans were journalled, or no command yet
        return
    differ = [f"{PLAN_FLAGS.get(k, k)} {_shown(first.get(k))} there, {_shown(now.get(k))} here"
              for k in now if first.get(k) != now.get(k)]
    if differ:
        raise InputError("--resume: the unfinished tune was planned with other options (" + "; ".join(differ)
                         + "): run it with the same ones, or start a new tune without --resume")


def _shown(v) -> str:
    if v is None:
        return "(not given)"
    if isinstance(v, bool):
        return "on" if v else "off"
    return ",".join("x".join(map(str, x)) if isinstance(x, list) else str(x) for x in v) or "(none)"


def options(args) -> argparse.Namespace:
    """The parsed options checked and normalized; InputError in one line."""
    from qgemm_bench.tuning import candidates as cands
    from qgemm_bench.tuning import plan

    args.ops = list(plan.OPS) if args.op == "all" else [args.op]
    if args.op != "all" and args.op not in plan.OPS:
        raise InputError(f"--op {args.op!r}: expected {', '.join(plan.OPS)} or all")
    args.backend_list = _subset(args.backends, plan.BACKENDS, "--backends")
    args.format_list = _subset(args.formats, cands.FORMATS, "--formats")
    args.group_list = tuple(_subset(args.groups, plan.GROUPS, "--groups")) if args.groups else ()
    if args.group_list and ("int4" not in args.format_list or "int4_gemm" not in args.ops
                            or "triton" not in args.backend_list):
        raise InputError("--groups: int4 group sizes, for the Triton int4_gemm tune")
    args.m_set = None
    if args.ms is not None:
        try:
            args.m_set = {int(v) for v in args.ms.split(",")}
        except ValueError:
            raise InputError(f"--ms {args.ms!r}: expected comma-separated integers") from None
        known = set(cands.TABLE_M["split"]) | set(cands.TABLE_M["fused"]) | set(cands.HELION_WEIGHT_ONLY_M)
        if not args.m_set <= known:
            raise InputError(f"--ms: {sorted(args.m_set - known)} not among the tables' M ({sorted(known)})")
    args.layer_set = None
    if args.layers is not None:
        from qgemm_bench.tuning.weight_only import kxn, parse_layers

        args.layer_set = parse_layers(args.layers)
        if bad := [kn for kn in args.layer_set if kn[0] % LAYER_K]:
            raise InputError(f"--layers: K must be a multiple of {LAYER_K} (the tables' group and K block), "
                             f"not {kxn(bad)}")
        if args.helion_layers:
            raise InputError("--layers and --helion-layers: one or the other (--layers names Helion's too)")
    for flag, on in (("--helion-layers", args.helion_layers), ("--helion-variants", args.helion_variants)):
        if on and "helion" not in args.backend_list:
            raise InputError(f"{flag}: Helion's buckets, for a tune with --backends helion")
    weight_only = {"--ms": args.ms is not None, "--formats": args.format_list != list(cands.FORMATS),
                   "--helion-layers": args.helion_layers, "--helion-variants": args.helion_variants,
                   "--layers": args.layers is not None}
    if args.ops == ["split_k_gemm"] and (given := [flag for flag, on in weight_only.items() if on]):
        raise InputError(f"{', '.join(given)}: the weight-only GEMMs' (int4_gemm, nvfp4_gemm), not split_k_gemm's")
    if args.like and not args.dry_run:
        raise InputError("--like plans a --dry-run without a GPU: give --dry-run too")
    if args.store == "":  # Tune reads "" as no --store: an unset $STORE would write the package's store
        raise InputError("--store '': expected a folder")
    if args.store is not None and Path(args.store).exists() and not Path(args.store).is_dir():
        raise InputError(f"--store {args.store}: not a folder")
    return args


def _subset(text: str, allowed, what: str) -> list[str]:
    got = [v.strip() for v in text.split(",") if v.strip()]
    if not got or not set(got) <= set(allowed) or len(set(got)) != len(got):
        raise InputError(f"{what} {text!r}: expected a comma-separated subset of {', '.join(allowed)}")
    return [v for v in allowed if v in got]


def table_checks() -> dict:
    """family -> its table's check (ValueError in one line), for the
    families that have one: a prior's table, and each table before a write."""
    from qgemm_bench.backends.triton_kernels import split_k_configs, weight_only_configs

    return {"weight_only": weight_only_configs.check_table, "split_k": split_k_configs.check_table}


def device_for(args, world):
    """The device to tune on; InputError without CUDA (unless --device cpu,
    which turns the Triton interpreter on where triton is not yet imported,
    or a --dry-run)."""
    import torch

    from qgemm_bench.harness import distributed
    from qgemm_bench.harness.environment import parse_device, resolve_device

    if args.device != "auto":
        parse_device(args.device)  # a name that is no device is refused, --dry-run or not
    if args.device == "cpu":
        if os.environ.get("TRITON_INTERPRET") != "1" and "triton" not in sys.modules:
            os.environ["TRITON_INTERPRET"] = "1"  # as the CPU sweep does: chosen before triton is imported
        if os.environ.get("TRITON_INTERPRET") != "1":  # a process that imported triton first (an in-process call)
            raise InputError("--device cpu tunes on the Triton interpreter: set TRITON_INTERPRET=1 (a test run)")
    elif not torch.cuda.is_available():
        if not args.dry_run:
            raise InputError("tune needs a CUDA GPU (--device cpu is a CPU test run on the Triton interpreter; "
                             "--dry-run lists the plan anywhere)")
        if args.device != "auto":  # a named GPU that is not here: not a plan for this CPU
            raise InputError(f"--device {args.device}: no CUDA device is available here; --dry-run --like NAME "
                             "plans as on the GPU of store entry NAME (e.g. --like h200)")
        args.device = "cpu"
    if world is not None:  # GPU LOCAL_RANK for auto/cuda (gloo: the collectives move Python objects)
        return torch.device(distributed.start(world, args.device))
    return resolve_device(args.device)


def main(argv: list[str]) -> int:
    args = options(parser().parse_args(argv))
    from qgemm_bench.harness import distributed

    world = distributed.from_env()
    device = device_for(args, world)
    if device.type == "cuda":
        from qgemm_bench.harness.environment import pin_triton_cache

        pin_triton_cache()
    try:
        return Tune(args, argv, device, world).run()
    finally:
        if world is not None:
            distributed.stop()


class Tune:
    """One tune: the plan, this rank's share of it, the journal and (rank 0)
    the store's family files."""

    def __init__(self, args, argv, device, world):
        import torch

        from qgemm_bench.configs.store import ROOT, Store
        from qgemm_bench.target import Target

        self.args, self.argv, self.device, self.world = args, argv, device, world
        self.rank, self.size = (world.rank, world.size) if world else (0, 1)
        self.main = self.rank == 0
        self.store = Store(Path(args.store) if args.store else ROOT)
        self.dtype = torch.float16 if device.type == "cpu" else torch.bfloat16
        if args.like:
            known = self.store.entries()
            if args.like not in known:
                raise InputError(f"--like {args.like}: no store entry of that name "
                                 f"({', '.join(sorted(known)) or 'none'} in {self.store.root})")
            self.target = known[args.like]
        elif device.type == "cuda" and not args.dry_run:
            from qgemm_bench.harness.environment import measure_ceilings

            self.target = Target.from_device(device, measure_ceilings(device) if self.main else None)
        else:
            self.target = Target.from_device(device)
        self.gpu = self.target.name

    # ------------------------------------------------------------------ the plan

    def priors(self) -> dict:
        """Each family's table that prunes the candidates: that of the
        nearest other GPU of this compute capability in the store (the
        package's where --store has none), else this GPU's own where no tune
        of it is unfinished (a partly written entry would prune untuned M to
        nothing: a resumed tune must plan as its first run did); None with
        --full or without one. Plus the GPUs they came from ("from", and
        per family "gpus"). The split_k family's prior is timed first in
        every shape, not a pruning: --full keeps it."""
        from qgemm_bench.configs.store import DEFAULT, distance
        from qgemm_bench.tuning.journal import Journal

        out, used, gpus = {"weight_only": None, "helion": None, "split_k": None}, set(), {}
        families = ["split_k"] if self.args.full else list(out)
        t = self.target
        for family in families:
            for store in dict.fromkeys([self.store.root, DEFAULT.root]):
                store = self.store if store == self.store.root else DEFAULT
                near = {g: e for g, e in store.entries().items() if g != t.name and e.capability == t.capability
                        and store.path(g, family).exists()}
                if near:
                    gpu = min(near, key=lambda g: (distance(t, near[g]), g))
                elif store.path(t.name, family).exists() and not Journal(store.root, t.name).exists():
                    gpu = t.name
                else:
                    continue
                out[family] = store.read(gpu, family)
                if check := table_checks().get(family):
                    try:  # the tuners read the prior's entries as the table's layout: else a traceback
                        check(out[family], str(store.path(gpu, family)))
                    except ValueError as e:
                        raise InputError(str(e)) from None
                gpus[family] = gpu
                if not self.args.full:
                    used.add(gpu)
                break
        return {**out, "from": ",".join(sorted(used)) or None, "gpus": gpus}

    def units(self, priors: dict) -> list:
        from qgemm_bench.tuning import plan

        a, out = self.args, []
        weight_ops = [op for op in a.ops if op != "split_k_gemm"]
        if "triton" in a.backend_list and weight_ops:
            fmts = [f for f in a.format_list if f"{f}_gemm" in weight_ops]
            out += plan.weight_only_units(fmts, a.m_set, priors["weight_only"], a.group_list, a.layer_set)
        if "helion" in a.backend_list:
            kns = sorted(a.layer_set) if a.layer_set else plan.helion_kns(a.helion_layers)
            out += plan.helion_units(a.ops, a.format_list, a.m_set, priors["weight_only"], self.target,
                                     kns, variants=a.helion_variants or None)
        if "triton" in a.backend_list and "split_k_gemm" in a.ops:
            out += plan.split_k_units(self.target.sms)
        if not out:
            from qgemm_bench.backends.triton_kernels.weight_only import FUSED_MAX_M

            why = ""
            weight = [op for op in a.ops if op != "split_k_gemm" and op.removesuffix("_gemm") in a.format_list]
            if weight and a.m_set and min(a.m_set) > FUSED_MAX_M and a.backend_list == ["helion"]:
                why = f": above M = {FUSED_MAX_M} Helion's weight-only kernels dequantize and call cuBLAS"
            raise InputError(f"nothing to tune for these options (--op, --backends, --formats, --ms){why}")
        return out

    def dry_run(self, units, done: set, priors: dict) -> int:
        from tabulate import tabulate

        from qgemm_bench.tuning import plan

        todo = [u for u in units if u.id not in done]
        rows = []
        for family in plan.FAMILIES:
            mine = [u for u in todo if u.family == family]
            if mine:
                rows.append([family, len(mine), sum(u.candidates for u in mine), round(sum(u.cost for u in mine))])
        total = sum(u.cost for u in todo)
        print(f"qgemm-bench tune plan for {self.gpu} ({self.target.device_name}, compute capability "
              f"{self.target.cc or 'none'}), store {self.store.root}")
        print("candidates: " + ("every candidate of the pools (--full)" if self.args.full else
                                "every candidate of the pools (no tuned GPU of its kind to start from)"
                                if not priors["from"] else
                                f"those that won at each M on {priors['from']} (--full: all)"))
        if self.device.type == "cpu" and not self.args.like:
            print("a CPU plan (the Triton interpreter): `--like h200` plans as on that GPU")
        if done:
            print(f"--resume: {len(units) - len(todo)} of {len(units)} units already written by the unfinished tune")
        print(tabulate(rows + [["total", len(todo), sum(r[2] for r in rows), round(total)]],
                       headers=["family", "units", "candidates", "expected s"]))
        for size in (1, 2, 4):
            longest = max((sum(u.cost for u in part) for part in plan.shares(todo, size)), default=0.0)
            budget = self.args.budget_s or plan.default_budget(todo, size)
            print(f"on {size} GPU{'s' if size > 1 else ' '}: expected {longest / 60:5.1f} min, budget "
                  f"{budget / 60:5.1f} min"
                  + (" (the budget shortens the units' candidate lists)" if budget < longest else ""))
        return 0

    # ------------------------------------------------------------------ the run

    def run(self) -> int:
        from qgemm_bench.harness import distributed
        from qgemm_bench.tuning import plan
        from qgemm_bench.tuning.journal import Journal

        t0 = time.monotonic()
        priors = self.priors() if self.main else None
        if self.world is not None:  # one choice for every rank (the ceilings that rank 0 alone measured)
            priors = distributed.broadcast(priors, self.world)
        units = self.units(priors)
        journal = Journal(self.store.root, self.gpu, self.rank)
        if self.args.resume:  # every rank reads the journal, so each refuses alike
            check_resume(journal.first_plan(), plan_options(self.args))
        done, spent = set(), 0.0
        if self.main:
            if self.args.resume:
                done = journal.done()
                spent = sum(r.get("s", 0.0) for r in journal.records()) / self.size
            elif journal.exists() and not self.args.dry_run:
                journal.clear()  # a new tune: the unfinished one's journal goes
        if self.world is not None:  # also: nobody journals before rank 0 cleared
            done, spent = distributed.broadcast((done, spent), self.world)
        if self.args.dry_run:
            return self.dry_run(units, done, priors) if self.main else 0
        try:  # before any timing, on every rank: a store it cannot write would lose the tune's results
            if self.main:  # each piece of a tune made in pieces (first run, every --resume) in the provenance
                journal.add_command(" ".join(["qgemm-bench tune", *self.argv]), plan_options(self.args))
            else:  # the other ranks journal there too, from their first unit on
                journal.dir.mkdir(parents=True, exist_ok=True)
                tempfile.TemporaryFile(dir=journal.dir).close()
        except OSError as e:
            from qgemm_bench.harness.files import why

            where = f"--store {self.store.root}" if self.args.store else f"the package's config store {self.store.root}"
            raise InputError(f"{where}: cannot write there ({why(e)}); give --store a folder you can write") from None
        todo = [u for u in units if u.id not in done]
        mine = plan.shares(todo, self.size)[self.rank]
        # The whole tune's budget, of which a resumed one has the rest: its units' shares are what they
        # would have been in one go.
        budget = self.args.budget_s or plan.default_budget(units, self.size)
        deadline = t0 + max(0.0, budget - spent)
        end = min(deadline, t0 + self.args.stop_after_s) if self.args.stop_after_s else deadline
        if self.main:
            print(f"tune {self.gpu}: {len(todo)} units ({len(done)} already written)"
                  + (f" over {self.size} ranks" if self.size > 1 else "")
                  + f", budget {budget:.0f} s" + (f" ({spent:.0f} spent)" if spent else "")
                  + (f", this run at most {end - t0:.0f} s" if end < deadline else "") + "; candidates: "
                  + (f"those that won on {priors['from']}" if priors["from"] else "the whole pools"), flush=True)
        writer = self.writer(priors, units, budget, journal) if self.main else None
        if writer is not None and done:  # what the unfinished tune journalled is in the store, even where a
            for rec in journal.records():  # rank died before rank 0 wrote its entries
                writer.add(rec, write=False)
        records, failed, stopped = self.tune_units(mine, deadline, end, priors, journal, writer)
        return self.finish(units, done, records, failed, stopped, journal, writer, time.monotonic() - t0)

    def writer(self, priors, units, budget: float, journal):
        from qgemm_bench.backends.triton_kernels import split_k_configs as skc
        from qgemm_bench.harness.environment import git_commit, versions
        from qgemm_bench.tuning import plan, split_k
        from qgemm_bench.tuning.journal import Writer
        from qgemm_bench.tuning.timing import ROUNDS

        provenance = {"commit": git_commit(), "date": None, "command": " ".join(["qgemm-bench tune", *self.argv]),
                      "commands": journal.commands(), "tune": journal.tune_id(), "rounds": ROUNDS,
                      "versions": versions(self.device),
                      "budget_s": round(budget), "world_size": self.size, "pruned_by": priors["from"],
                      "priors": priors["gpus"], "units_planned": len(units), "complete": False,
                      "cut_short": None, "not_timed": None}  # known when the tune ends (finish)
        writer = Writer(self.store, self.gpu, list(plan.FAMILIES), provenance, self.target, table_checks())
        # Every planned split-K shape has an entry from the first write on: one not reached (or not
        # timed) keeps the prior GPU's config, not this GPU's nearest entry or the heuristic.
        entries = writer.tables["split_k"].setdefault("entries", {})
        for u in units:
            if u.family == "split_k":
                writer.touched.add("split_k")
                for mode in skc.MODES:
                    if not split_k.is_timed(entries.setdefault(mode, {}).get(skc.key(*u.shape), {})):
                        entries[mode][skc.key(*u.shape)] = split_k.untimed_entry(
                            u.shape, mode, self.target.sms, self.gpu, priors["split_k"], priors["gpus"].get("split_k"))
        return writer

    def tune_units(self, mine, deadline, end, priors, journal, writer):
        """Run this rank's units: split-K as one batch with its share of the
        budget, then Helion and weight-only one by one, each with its share
        of the time left until `deadline`; each journalled with the seconds
        it took (and on rank 0 written) when done. (records, failed unit
        ids, why it stopped or ""); past the deadline, or this run's `end`
        (--stop-after-s), the units left are not started (--resume tunes
        them)."""
        from tqdm import tqdm

        from qgemm_bench.harness import faults
        from qgemm_bench.tuning import plan, split_k

        self.prepare()
        records, failed, late, stopped = [], [], [], ""
        bar = tqdm(total=len(mine), unit="entry", desc=f"tune {self.gpu}" + (f" rank {self.rank}" if self.world
                                                                             else ""),
                   dynamic_ncols=True, file=sys.stderr, position=self.rank)

        last = [time.monotonic()]

        def keep(record):
            record["s"] = round(time.monotonic() - last[0], 1)  # what the unit took (--resume's budget)
            last[0] = time.monotonic()
            journal.append(record)
            records.append(record)
            if writer is not None:
                writer.add(record)

        try:
            order = sorted(mine, key=lambda u: plan.FAMILIES.index(u.family))
            batch = [u for u in order if u.family == "split_k"]
            singles = [u for u in order if u.family != "split_k"]
            if batch:  # first: its tuner spends the share it is given, which the others' overruns cannot eat
                total, now = sum(u.cost for u in order), time.monotonic()
                share = max((deadline - now) * sum(u.cost for u in batch) / total,
                            split_k.SHAPE_FLOOR_S * len(batch))  # the tuner's floor per shape
                failed += self.tune_split_k(batch, priors, min(now + share, deadline, end), keep, bar)
            for i, unit in enumerate(singles):
                last[0] = time.monotonic()
                if i and last[0] > end:  # the rest waits for --resume: past the budget a unit would still
                    late += [u.id for u in singles[i:]]  # check and time a few (a run starts one at least)
                    break
                left = sum(u.cost for u in singles[i:])
                stop = plan.unit_stop(time.monotonic(), deadline, unit, left, self.args.shape_budget_s)
                bar.set_postfix_str(unit.id, refresh=False)
                try:
                    record = self.tune_one(unit, priors, stop)
                except Exception as e:  # noqa: BLE001 - one unit's failure is its own, unless the GPU is gone
                    if faults.context_lost(e):
                        raise
                    print(f"{unit.id}: {one_line(e, 200)}",
                          file=sys.stderr, flush=True)
                    record = None
                if record is None:
                    failed.append(unit.id)
                else:  # past its share before it finished: some candidates or the second round skipped
                    record["cut_short"] = time.monotonic() > stop
                    keep(record)
                bar.update()
        except Exception as e:  # noqa: BLE001 - a lost context: what was tuned is written, --resume goes on
            if not faults.context_lost(e):
                raise
            stopped = f"the CUDA context was lost ({one_line(e, 160)})"
        finally:
            bar.close()
            self.restore()
        if late:
            print(f"rank {self.rank}: {'this run' if end < deadline else 'the budget'} ended before {len(late)} "
                  "units (their buckets take the nearest tuned entry until `tune --resume` tunes them)",
                  file=sys.stderr, flush=True)
        return records, failed, stopped

    def prepare(self) -> None:
        """The tuners' run settings: device, dtype, watchdog."""
        from qgemm_bench.harness.measure import Settings
        from qgemm_bench.harness.watchdog import stall_reason
        from qgemm_bench.tuning import weight_only

        # Put back by restore(): a tune run in-process (tests, notebooks) leaves the tuner as it found it.
        self._saved = (weight_only.DEV, weight_only.DTYPE, weight_only.TARGET, weight_only.SETTINGS,
                       weight_only.WATCH.seconds, weight_only.WATCH.on_stall)
        weight_only.DEV, weight_only.DTYPE, weight_only.TARGET = self.device, self.dtype, self.target
        if self.device.type == "cpu":  # a test run: interpreter times say nothing; a few samples will do
            weight_only.SETTINGS = Settings(warmup_ms=0.0, rep_ms=1.0)
        weight_only.WATCH.seconds = self.args.stall_timeout

        def stalled(label) -> int:
            print(f"error: {stall_reason(label, weight_only.WATCH.seconds)}; the entries tuned before it are "
                  f"written (tune --resume continues)", file=sys.stderr)
            return 1

        weight_only.WATCH.on_stall = stalled

    def restore(self) -> None:
        from qgemm_bench.tuning import weight_only

        if saved := getattr(self, "_saved", None):
            (weight_only.DEV, weight_only.DTYPE, weight_only.TARGET, weight_only.SETTINGS,
             weight_only.WATCH.seconds, weight_only.WATCH.on_stall) = saved

    def tune_one(self, unit, priors, stop) -> dict | None:
        from qgemm_bench.backends.config_buckets import bucket
        from qgemm_bench.backends.triton_kernels import weight_only_configs as woc
        from qgemm_bench.tuning import candidates as cands
        from qgemm_bench.tuning import helion, weight_only

        if unit.family == "weight_only":
            fmt_id = cands.FORMATS.index(unit.fmt)
            kernel = woc.kernel(fmt_id, unit.path)
            prior = priors["weight_only"]
            entries = None if prior is None else prior.get("kernels", {}).get(kernel, {})
            other = woc.kernel(fmt_id, "fused" if unit.path == "split" else "split")
            rival = None if prior is None else prior.get("kernels", {}).get(other, {})
            entry = weight_only.tune_unit(unit.fmt, unit.path, *unit.shape, entries, stop, self.args.group_list,
                                          rival)
            if entry is None:
                return None
            return {"unit": unit.id, "family": "weight_only", "kernel": kernel, "key": bucket(*unit.shape),
                    "entry": entry}
        # This GPU's own entry first (a re-tune keeps what it had unless something beats it), then the prior's.
        own = [self.store.read(self.gpu, "helion"), priors["helion"]]
        r = helion.tune_unit(unit.op, unit.shape, self.device, priors["weight_only"], own, stop,
                             self.dtype, self.gpu, self.target, variants=self.args.helion_variants or None)
        if r is None:
            return None
        return {"unit": unit.id, "family": "helion", "kernel": r["op"], "key": r["key"], "entry": r["entry"]}

    def tune_split_k(self, batch, priors, deadline, keep, bar) -> list[str]:
        """The split-K shapes in one tuner call (it compiles ahead in worker
        processes and shares its time over the shapes itself): until the
        deadline, at most --shape-budget-s a shape; the prior GPU's entry
        of each shape timed first (and kept where nothing is timed)."""
        from qgemm_bench.backends.triton_kernels import split_k_configs as skc
        from qgemm_bench.tuning import split_k
        from qgemm_bench.types import Shape

        ids = {tuple(u.shape): u.id for u in batch}
        now = time.monotonic()
        stop = deadline if self.args.shape_budget_s is None else \
            min(deadline, now + self.args.shape_budget_s * len(batch))
        tried = {}  # shape -> its last record

        def on_shape(shape, entries, doc, cut_short):
            tried[tuple(shape)] = {"unit": ids[tuple(shape)], "family": "split_k", "key": skc.key(*shape),
                                   "entries": entries, "sms": doc.get("sms"),
                                   "timed": all(map(split_k.is_timed, entries.values())), "cut_short": bool(cut_short)}
            keep(tried[tuple(shape)])
            bar.update()

        jobs = 0 if self.device.type == "cpu" else max(0, min(16, (os.cpu_count() or 2) // self.size - 2))
        opts = argparse.Namespace(base={"entries": {}}, out=None, retune=True, keep_faster=False, jobs=jobs,
                                  warmup_ms=5.0, rep_ms=20.0, limit_s=max(1.0, stop - now))
        split_k.tune(opts, [Shape(*u.shape) for u in batch], self.device, deadline=stop, on_shape=on_shape,
                     dtype=self.dtype, gpu=self.gpu, prior=priors["split_k"], prior_gpu=priors["gpus"].get("split_k"),
                     target=self.target)
        # no config ran right: every candidate tried, none timed (one not reached waits for --resume)
        return [r["unit"] for r in tried.values() if not r["timed"] and not r["cut_short"]]

    def finish(self, units, done, records, failed, stopped, journal, writer, wall_s: float) -> int:
        """Rank 0: every rank's records folded into the store; the journal
        deleted when every planned unit is in. The exit status."""
        from qgemm_bench.harness import distributed

        if self.world is not None:
            try:
                gathered = distributed.gather((records, failed, stopped), self.world)
            except Exception as e:  # noqa: BLE001 - a dead rank: its journal (one host) still counts
                gathered = None
                print(f"rank {self.rank}: the gather failed ({type(e).__name__}); rank 0 reads the journals",
                      file=sys.stderr)
            if not self.main:
                return 1 if failed or stopped else 0
            failed = [f for part in gathered or [] for f in part[1]] or failed
            stopped = "; ".join(p[2] for p in gathered or [] if p[2]) or stopped
            mine = {r["unit"] for r in records}
            for rec in [r for part in gathered or [] for r in part[0]] + journal.records():
                if rec["unit"] not in mine:  # in order: a unit's later record (a second pass) wins
                    writer.add(rec, write=False)
        from qgemm_bench.tuning.journal import cut_short_units, timed_units

        records = journal.records()
        written, timed = {r["unit"] for r in records}, timed_units(records)
        planned = {u.id for u in units}
        complete = planned <= timed  # every unit written with a timed entry, not merely written
        writer.provenance.update(cut_short=len(cut_short_units(records) & planned), not_timed=len(planned - timed))
        paths = writer.write_all(complete) if writer.touched else []
        if complete:
            journal.clear()
        print(f"tuned {len(written - done)} entries in {wall_s / 60:.1f} min"
              + (f"; wrote {', '.join(str(p) for p in paths)}" if paths else "; nothing written"), flush=True)
        if failed:
            print(f"{len(failed)} units had no config that ran right: {', '.join(failed[:8])}"
                  + (" ..." if len(failed) > 8 else ""), file=sys.stderr)
        if stopped:
            print(f"stopped: {stopped}", file=sys.stderr)
        if not complete:
            print("the tune is unfinished: `qgemm-bench tune --resume` (same options) tunes the rest",
                  file=sys.stderr)
        return 1 if failed or stopped else 0
