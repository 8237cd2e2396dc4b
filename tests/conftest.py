import os

import torch

# The Triton kernels run on CPU tensors through the interpreter, which must be
# chosen before triton is first imported (test modules import the backends).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
