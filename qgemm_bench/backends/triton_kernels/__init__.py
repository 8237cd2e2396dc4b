"""Our Triton kernels (named triton_kernels so it cannot shadow the triton
package): weight_only.py (int4 / NVFP4 weight-only GEMM) with its decode
helpers (decode.py), split_k.py, and the split-K parts both share
(split_k_parts.py). Importing them imports triton: on CPU, TRITON_INTERPRET=1
must be set first (checks.use_interpreter_on_cpu)."""
