"""`qgemm-bench tune`: time each kernel family's candidate configs on this
GPU and write its config store entry.

command.py   the subcommand (options, the run, rank 0's writes)
plan.py      the units (one store entry each), their expected cost, shares
candidates.py  every family's candidate pools and their pruning
timing.py    the one way a candidate is timed (the runner's graph timing)
journal.py   writing the store as units finish; --resume
weight_only.py, split_k.py, helion.py   the per-family tuners (each also
             runnable alone for its expert modes: python -m ...)
fused_grid.py  the fused kernel's config grid against the peers (a study)
"""
