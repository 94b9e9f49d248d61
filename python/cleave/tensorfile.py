"""Cleave tensor files: parameters, checkpoints and per-step batches.

The layout is safetensors': an 8-byte little-endian header length ``N``, ``N``
bytes of JSON (padded with spaces to a multiple of 8), then the raw
little-endian tensor data::

    {"__metadata__": {"format": "cleave", "crc32:<name>": "<8 hex digits>", ...},
     "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}

``data_offsets`` are relative to the first byte after the header. Cleave adds
the metadata entry ``format = cleave`` and, per tensor, ``crc32:<name>``:
zlib's CRC-32 of the tensor's bytes as 8 lowercase hex digits, checked on
read. Writes go to a temporary file in the same directory that is renamed
into place, so a crash never leaves a half-written file under the final name.

This module uses the standard library only; ``cleave.torch`` converts
to and from ``torch.Tensor``. ``python3 -m cleave.tensorfile FILE`` lists a
file's tensors and checks their checksums.
"""

import array
import json
import math
import os
import struct
import sys
import tempfile
import zlib
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

from .dtypes import DTYPES

#: Bytes per element of every dtype the format carries (the runtime's table).
DTYPE_SIZES = {d.file_name: d.bytes for d in DTYPES}

#: ``array`` type codes for the dtypes that the standard library can decode.
_ARRAY_CODES = {"F64": "d", "F32": "f", "I64": "q", "I32": "i"}

_FORMAT = "cleave"
_CRC_PREFIX = "crc32:"
_MAX_HEADER = 100 * 1024 * 1024


class TensorFileError(Exception):
    """A tensor file is malformed, corrupt, or cannot be written."""


@dataclass(frozen=True)
class Tensor:
    """One tensor: its dtype name, shape and raw little-endian bytes (any
    bytes-like object, e.g. a memoryview of an array)."""

    dtype: str
    shape: Tuple[int, ...]
    data: bytes  # or another bytes-like object

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def values(self) -> list:
        """The elements as a flat Python list (row-major)."""
        code = _ARRAY_CODES.get(self.dtype)
        if code is None:
            raise TensorFileError(f"cannot decode {self.dtype} without torch")
        arr = array.array(code)
        arr.frombytes(self.data)
        if sys.byteorder != "little":
            arr.byteswap()
        return arr.tolist()

    @staticmethod
    def from_values(values: Iterable, shape: Sequence[int], dtype: str = "F32") -> "Tensor":
        """Packs a flat sequence of numbers (row-major) into a tensor."""
        code = _ARRAY_CODES.get(dtype)
        if code is None:
            raise TensorFileError(f"cannot encode {dtype} without torch")
        arr = array.array(code, values)
        if sys.byteorder != "little":
            arr.byteswap()
        tensor = Tensor(dtype, tuple(int(d) for d in shape), arr.tobytes())
        _check_tensor("<values>", tensor)
        return tensor


@dataclass
class TensorFile:
    """The contents of a tensor file, tensors in file order."""

    tensors: Dict[str, Tensor]
    metadata: Dict[str, str]


def crc32_hex(data: bytes) -> str:
    """zlib's CRC-32 of ``data`` as 8 lowercase hex digits."""
    return format(zlib.crc32(data) & 0xFFFFFFFF, "08x")


def _check_tensor(name: str, tensor: Tensor) -> None:
    if tensor.dtype not in DTYPE_SIZES:
        raise TensorFileError(
            f"tensor '{name}': unknown dtype {tensor.dtype!r} "
            f"(expected one of {', '.join(DTYPE_SIZES)})")
    if any(not isinstance(d, int) or d < 0 for d in tensor.shape):
        raise TensorFileError(f"tensor '{name}': bad shape {list(tensor.shape)}")
    expected = tensor.numel * DTYPE_SIZES[tensor.dtype]
    size = memoryview(tensor.data).nbytes
    if size != expected:
        raise TensorFileError(
            f"tensor '{name}': {size} bytes of data, expected {expected} "
            f"for {tensor.dtype} {list(tensor.shape)}")


def encode(tensors: Mapping[str, Tensor], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The file's bytes for ``tensors`` (in mapping order) and ``metadata``."""
    return b"".join([encode_header(tensors, metadata)] + [bytes(t.data) for t in tensors.values()])


def encode_header(tensors: Mapping[str, Tensor],
                  metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The length prefix and JSON header; the tensors' data follow it in order."""
    meta = {"format": _FORMAT}
    for key, value in (metadata or {}).items():
        if key == "format" or key.startswith(_CRC_PREFIX):
            raise TensorFileError(f"metadata key '{key}' is reserved")
        if not isinstance(key, str) or not isinstance(value, str):
            raise TensorFileError(f"metadata '{key}': keys and values must be strings")
        meta[key] = value
    header = {"__metadata__": meta}
    offset = 0
    for name, tensor in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise TensorFileError(f"bad tensor name {name!r}")
        _check_tensor(name, tensor)
        meta[_CRC_PREFIX + name] = crc32_hex(tensor.data)
        size = memoryview(tensor.data).nbytes
        header[name] = {"dtype": tensor.dtype, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write(path: str, tensors: Mapping[str, Tensor],
          metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes a tensor file atomically (temporary file, then rename). The
    tensors' data are streamed, not copied into one buffer."""
    header = encode_header(tensors, metadata)
    write_bytes_atomically(path, header, *(t.data for t in tensors.values()))


def write_bytes_atomically(path: str, *chunks) -> None:
    """Writes ``chunks`` to a temporary file beside ``path`` and renames it into place."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates the file 0600; give it the usual umask-based mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def decode(data: bytes, source: str = "<bytes>", check_crc: bool = True) -> TensorFile:
    """Parses and validates a tensor file's bytes; ``source`` names it in errors."""
    def fail(message: str) -> TensorFileError:
        return TensorFileError(f"{source}: {message}")

    if len(data) < 8:
        raise fail(f"too short for a header ({len(data)} bytes)")
    (length,) = struct.unpack_from("<Q", data, 0)
    if length > _MAX_HEADER or 8 + length > len(data):
        raise fail(f"header length {length} does not fit the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise fail(f"header is not valid JSON: {err}") from None
    if not isinstance(header, dict):
        raise fail("header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise fail("__metadata__ must map strings to strings")
    if metadata.get("format") != _FORMAT:
        raise fail(f"not a Cleave tensor file (metadata format = {metadata.get('format')!r})")
    body = memoryview(data)[8 + length:]
    tensors, spans = {}, []
    for name, entry in header.items():
        tensor, span = _decode_entry(name, entry, body, fail)
        crc = metadata.get(_CRC_PREFIX + name)
        if crc is None:
            raise fail(f"tensor '{name}' has no crc32 entry in the metadata")
        if check_crc and crc != crc32_hex(tensor.data):
            raise fail(f"tensor '{name}': checksum mismatch (file says {crc}, data gives "
                       f"{crc32_hex(tensor.data)}): the file is corrupt")
        tensors[name] = tensor
        spans.append(span)
    covered = 0
    for begin, end in sorted(spans):
        if begin < covered:
            raise fail("tensor data ranges overlap")
        covered = end
    if covered != len(body) and spans:
        raise fail(f"{len(body) - covered} bytes of data belong to no tensor")
    for key in metadata:
        if key.startswith(_CRC_PREFIX) and key[len(_CRC_PREFIX):] not in tensors:
            raise fail(f"metadata '{key}' names no tensor")
    return TensorFile(tensors, metadata)


def _decode_entry(name, entry, body, fail):
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise fail(f"tensor '{name}': entry must have dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPE_SIZES:
        raise fail(f"tensor '{name}': unknown dtype {dtype!r}")
    if not isinstance(shape, list) or any(type(d) is not int or d < 0 for d in shape):
        raise fail(f"tensor '{name}': bad shape {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or any(type(o) is not int for o in offsets)):
        raise fail(f"tensor '{name}': bad data_offsets {offsets!r}")
    begin, end = offsets
    size = math.prod(shape) * DTYPE_SIZES[dtype]
    if not 0 <= begin <= end <= len(body) or end - begin != size:
        raise fail(f"tensor '{name}': data_offsets {offsets} do not hold {size} bytes "
                   f"inside {len(body)} bytes of data")
    return Tensor(dtype, tuple(shape), bytes(body[begin:end])), (begin, end)


def read(path: str, check_crc: bool = True) -> TensorFile:
    """Reads and validates a tensor file (checksums included)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise TensorFileError(f"{path}: cannot read: {err.strerror}") from None
    return decode(data, path, check_crc)


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python3 -m cleave.tensorfile FILE", file=sys.stderr)
        return 2
    try:
        contents = read(argv[0])
    except TensorFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for key, value in contents.metadata.items():
        if not key.startswith(_CRC_PREFIX):
            print(f"# {key} = {value}")
    for name, tensor in contents.tensors.items():
        print(f"{name}\t{tensor.dtype}\t{list(tensor.shape)}\tcrc32 ok")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
