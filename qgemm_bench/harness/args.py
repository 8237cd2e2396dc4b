"""Command-line parsing that fails in one line: a parser whose errors are
InputErrors (the CLI prints `error: ...` and exits 2, no usage block), value
types that refuse non-finite and out-of-range numbers up front, and option
values that start with '-' (`--shape -1,128,16`) read as values."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from qgemm_bench.errors import InputError

# Longest warm-up or timed time per backend and shape we accept (10 minutes):
# larger values are typos that would look like a hang.
MAX_MS = 600_000.0
MAX_REPEATS = 1000
MAX_SEED = 2**63 - 1  # torch generators take 64-bit seeds; JSON readers need them below 2**63
# --stall-timeout on CUDA: the longest step of the committed H100 runs (a backend's compile, check and
# timing at one shape) took well under a minute; Helion's autotuner, which may take longer, turns it off.
STALL_S = 1800.0
MAX_STALL_S = 7 * 86400.0  # a week


def prog(sub: str = "") -> str:
    """The command as it was typed, for usage lines: the console script
    `qgemm-bench`, else `runner.py` (a subcommand after it)."""
    name = "qgemm-bench" if Path(sys.argv[0]).name == "qgemm-bench" else "runner.py"
    return f"{name} {sub}" if sub else name


def comma_list(text: str, option: str, what: str, example: str) -> list[str]:
    """An option's comma-separated items, stripped; an empty one ("a,,b") is
    an InputError in one line."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise InputError(f"{option} {text!r}: an empty {what}; expected {what}s separated by commas, "
                         f"e.g. {option} {example}")
    return items


def parsed(parse_args, argv=None):
    """A script's parse_args(argv), or None after its one-line `error: ...`
    on stderr (the script then exits 2)."""
    try:
        return parse_args(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised as InputError) and dash-led values."""

    def error(self, message: str):
        raise InputError(message)

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        self._refuse_repeats(argv)
        return super().parse_args(self._join_dash_values(argv), namespace)

    def _refuse_repeats(self, argv: list[str]) -> None:
        """An option taking one value given twice (`--op a --op b`): argparse
        keeps the last without a word; a script that appends a flag to a
        command line would run something else than it reads."""
        seen: dict[argparse.Action, str] = {}
        for i, t in enumerate(argv):
            if t == "--":
                break
            if not t.startswith("--"):
                continue
            name, eq, value = t.partition("=")
            action = self._option_string_actions.get(name)
            if action is None and self.allow_abbrev:  # argparse takes unique prefixes: --out for --output-dir
                found = {a for o, a in self._option_string_actions.items() if o.startswith(name)}
                action = found.pop() if len(found) == 1 else None
            if isinstance(action, argparse._StoreAction):
                value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
                if action in seen:
                    raise InputError(f"{action.option_strings[0]} is given twice ({seen[action]!r}, then "
                                     f"{value!r}); give it once")
                seen[action] = value

    def _join_dash_values(self, argv: list[str]) -> list[str]:
        """`--opt -x` -> `--opt=-x` for options taking one value, when -x is no
        option: argparse otherwise reads -1,128,16 or -inf as a flag and says
        only 'expected one argument'."""
        takes_value = {s for a in self._actions if a.option_strings and a.nargs is None for s in a.option_strings}
        out, i = [], 0
        while i < len(argv):
            t = argv[i]
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if t in takes_value and nxt is not None and nxt.startswith("-") and len(nxt) > 1 \
                    and nxt not in self._option_string_actions and not nxt.startswith("--"):
                out.append(f"{t}={nxt}")
                i += 2
            else:
                out.append(t)
                i += 1
        return out


def _number(text: str, kind=float):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"not {text!r}") from None
    if kind is float and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return v


def float_in(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False, unit: str = ""):
    """An argparse type: a finite float in [lo, hi] (ends open as asked)."""
    def parse(text: str) -> float:
        v = _number(text)
        if (v < lo or (lo_open and v == lo)) or (v > hi or (hi_open and v == hi)):
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: expected a number in {left}{lo:g}, "
                                             f"{hi:g}{right}{unit}")
        return v
    parse.__name__ = "number"
    return parse


def int_in(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi]."""
    def parse(text: str) -> int:
        v = _number(text, int)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: expected an integer in [{lo}, {hi}]")
        return v
    parse.__name__ = "integer"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite float > 0."""
    return float_in(0.0, math.inf, lo_open=True)(text)


milliseconds = float_in(0.0, MAX_MS, unit=" ms")
positive_milliseconds = float_in(0.0, MAX_MS, lo_open=True, unit=" ms")
repeats = int_in(1, MAX_REPEATS)
seed = int_in(0, MAX_SEED)
stall_seconds = float_in(0.0, MAX_STALL_S, unit=" s")
# A tune's budgets: positive, at most a week (a bigger number is a typo, and is written into the provenance).
positive_seconds = float_in(0.0, MAX_STALL_S, lo_open=True, unit=" s")
compile_jobs = int_in(0, 64)
