"""Our Helion kernels (named helion_kernels so it cannot shadow the helion
package): kernels.py (the kernels; imports helion), configs.py (checked-in
configs per GPU and shape bucket, plain JSON), tuning.py (giving a bound
kernel its config: checked-in, explicit or autotuned). helion is imported
only when a Helion backend is prepared."""
