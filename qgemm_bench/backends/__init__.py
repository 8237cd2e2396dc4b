"""The backends: HOW an operator is computed. registry.py holds the registry
and the Backend / Prepared types; one module per backend family registers its
backends (torch_ops, tinygemm, fbgemm, gemlite, humming, triton_ops,
helion_ops); the kernels themselves live in triton_kernels/ and helion_kernels/."""
