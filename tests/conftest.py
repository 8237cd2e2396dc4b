import dataclasses
import os

import torch

# The Triton kernels run on CPU tensors through the interpreter, which must be
# chosen before triton is first imported (test modules import the backends).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

    # The interpreter's integer-overflow sanitizer computes every int32 add,
    # sub and mul a second time in int64 and range-checks it, then hands the
    # check to device_assert, which the interpreter drops unless its options
    # say debug (they never do: InterpreterOptions() is fixed, debug False).
    # So the check can never fail here: it is only work, about half of an
    # interpreted kernel's time. Switched off only where debug is off, which
    # leaves every kernel's results (and every assertion that could fire) as
    # they were.
    from triton.runtime import interpreter as _interpreter

    _builder = _interpreter.interpreter_builder
    if not _builder.options.debug and _builder.options.sanitize_overflow:
        _builder.options = dataclasses.replace(_builder.options, sanitize_overflow=False)
