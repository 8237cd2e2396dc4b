"""End-to-end Llama decode with quantized linear layers (issue 16).

quant_linear  QuantLinear, quantize_model, the one adapter to the backend registry
llama         model presets (LlamaConfig), build with random weights, load a checkpoint
decode        static KV cache, CUDA-graph capture of one decode step, decode/prefill timing
quality       logit metrics against the bf16 model, perplexity over a text
bench         the loop over backends and formats: rows, run folder, report, plot
cli           add_arguments(parser) and run(args) for runner.py --model

Nothing here imports transformers, triton or touches a device at import time.
"""
