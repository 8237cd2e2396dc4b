"""qgemm-bench: a benchmark harness for the GEMMs low-bit LLM inference runs on."""

__version__ = "0.2.0"
