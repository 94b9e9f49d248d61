"""Token files for test/Tools/cleave-run-validation.mlir, and the check
that runs' validation losses are equal.

    validation.py tokens DIR    writes DIR/{train,val,val4,valbig,odd}.bin
    validation.py same A B ...  the val_loss/val_step of every file equal A's
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from cleave import tensorfile  # noqa: E402


def tokens(out):
    r = random.Random(0)
    def ids(n, high):
        return [r.randrange(high) for _ in range(n)]
    files = {"train.bin": struct.pack("<4000H", *ids(4000, 60)),
             "val.bin": struct.pack("<1000H", *ids(1000, 60)),
             # the same ids as 4-byte tokens, and another tokenizer's ids
             "val4.bin": struct.pack("<1000I", *ids(1000, 60)),
             "valbig.bin": struct.pack("<1000H", *ids(1000, 6000)),
             "odd.bin": struct.pack("<1000H", *ids(1000, 60)) + b"\0"}
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def values(path):
    t = tensorfile.read(path)
    return [list(t.tensors[name].values()) for name in ("val_loss", "val_step")]


def same(paths, rtol=1e-5):
    ref_loss, ref_step = values(paths[0])
    print(f"{paths[0]}: val_step {ref_step} val_loss {ref_loss}")
    ok = True
    for path in paths[1:]:
        loss, step = values(path)
        close = step == ref_step and all(
            abs(a - b) <= rtol * abs(b) for a, b in zip(loss, ref_loss))
        print(f"{path}: {'equal' if close else 'DIFFERENT'}: val_step {step} val_loss {loss}")
        ok = ok and close
    return ok


if __name__ == "__main__":
    if sys.argv[1] == "tokens":
        tokens(sys.argv[2])
    else:
        sys.exit(0 if same(sys.argv[2:]) else 1)
