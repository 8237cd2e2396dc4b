"""The config store (store.py): configs/<gpu>/ per GPU, one loader."""

from qgemm_bench.configs.store import DEFAULT, FAMILIES, Entry, Store, entries, load, write

__all__ = ["DEFAULT", "FAMILIES", "Entry", "Store", "entries", "load", "write"]
