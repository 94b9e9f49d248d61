"""The runtime's element types, read from the one table the C++ side uses.

``include/cleave/Runtime/DTypes.def`` holds one
``CLEAVE_DTYPE(ENUM, CODE, NAME, FILE_NAME, BYTES, IS_FLOAT, BITS)`` line per
element type; the runtime's C ABI, the compiler and this module all read it,
so a code, a name or a size is written once. ``CLEAVE_DTYPES_DEF`` overrides
where the file is looked for (default: the source tree this package is in).
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Tuple

_ENTRY = re.compile(
    r'^CLEAVE_DTYPE\(\s*(\w+)\s*,\s*(\d+)\s*,\s*"([^"]+)"\s*,\s*"([^"]+)"\s*,'
    r'\s*(\d+)\s*,\s*([01])\s*,\s*(\d+)\s*\)\s*$')


@dataclass(frozen=True)
class DType:
    """One row of DTypes.def."""
    enum: str        # the C enumerator is CLEAVE_<enum>
    code: int        # the ABI code
    name: str        # MLIR spelling: "f32", "bf16", "i64"
    file_name: str   # safetensors dtype: "F32", "BF16", "I64"
    bytes: int       # bytes per element
    is_float: bool
    bits: int

    @property
    def torch_name(self) -> str:
        """The ``torch`` attribute of this type: "float32", "bfloat16", "int64"."""
        prefix = {"f": "float", "bf": "bfloat", "i": "int"}
        head = self.name.rstrip("0123456789")
        return prefix[head] + str(self.bits)


def default_path() -> Path:
    override = os.environ.get("CLEAVE_DTYPES_DEF")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "include" / "cleave" / "Runtime" / "DTypes.def"


def parse(text: str, where: str = "DTypes.def") -> Tuple[DType, ...]:
    """The rows of a DTypes.def text, in file order; raises ValueError on a
    ``CLEAVE_DTYPE`` line this parser does not understand."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("CLEAVE_DTYPE("):
            continue
        match = _ENTRY.match(line)
        if not match:
            raise ValueError(f"{where}:{number}: cannot read '{line}'")
        enum, code, name, file_name, size, is_float, bits = match.groups()
        rows.append(DType(enum, int(code), name, file_name, int(size),
                          is_float == "1", int(bits)))
    if not rows:
        raise ValueError(f"{where}: no CLEAVE_DTYPE entries")
    return tuple(rows)


def _load() -> Tuple[DType, ...]:
    path = default_path()
    try:
        text = path.read_text()
    except OSError as e:
        raise ImportError(f"cleave.dtypes: cannot read the element-type table {path} "
                          f"({e.strerror}); set CLEAVE_DTYPES_DEF to its path") from e
    return parse(text, str(path))


#: Every element type of the runtime ABI, in code order.
DTYPES: Tuple[DType, ...] = _load()
#: By safetensors name ("F32") and by MLIR spelling ("f32").
BY_FILE_NAME: Dict[str, DType] = {d.file_name: d for d in DTYPES}
BY_NAME: Dict[str, DType] = {d.name: d for d in DTYPES}
