"""Entry points other benchmark tools load (tritonbench, Helion's benchmark runner)."""
