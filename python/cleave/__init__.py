"""Python side of Cleave.

- ``cleave.tensorfile``: the tensor file format that ``cleave-run`` loads
  (parameters, checkpoints, per-step batches); standard library only.
- ``cleave.torch``: the PyTorch front-end (``cleave.torch.export``); it needs
  ``torch`` (Debian's python3-torch 1.13 under /usr/bin/python3).

Importing ``cleave`` itself imports nothing heavy.
"""
