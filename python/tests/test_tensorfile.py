"""The tensor file format (cleave.tensorfile, standard library only)."""

import json
import os
import pathlib
import struct
import tempfile
import unittest
import zlib

from cleave import tensorfile
from cleave.tensorfile import Tensor, TensorFileError


class TensorFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "t.safetensors")

    def tearDown(self):
        self.dir.cleanup()

    def sample(self):
        return {"w": Tensor.from_values([1.5, -2.0, 0.25, 8.0, 0.0, -0.5], (2, 3), "F32"),
                "ids": Tensor.from_values([0, 7, -3], (3,), "I32"),
                "scalar": Tensor.from_values([3.0], (), "F64")}

    def test_round_trip_names_shapes_values_metadata(self):
        tensorfile.write(self.path, self.sample(), {"content": "test"})
        back = tensorfile.read(self.path)
        self.assertEqual(list(back.tensors), ["w", "ids", "scalar"])
        self.assertEqual(back.tensors["w"].shape, (2, 3))
        self.assertEqual(back.tensors["w"].values(), [1.5, -2.0, 0.25, 8.0, 0.0, -0.5])
        self.assertEqual(back.tensors["ids"].values(), [0, 7, -3])
        self.assertEqual(back.tensors["scalar"].shape, ())
        self.assertEqual(back.metadata["content"], "test")
        self.assertEqual(back.metadata["format"], "cleave")

    def test_layout_is_safetensors_with_crc32_metadata(self):
        tensorfile.write(self.path, self.sample())
        data = pathlib.Path(self.path).read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        self.assertEqual(length % 8, 0, "header padded to 8 bytes")
        header = json.loads(data[8:8 + length])
        body = data[8 + length:]
        self.assertEqual(header["w"], {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]})
        self.assertEqual(header["ids"]["data_offsets"], [24, 36])
        for name in ("w", "ids", "scalar"):
            begin, end = header[name]["data_offsets"]
            crc = format(zlib.crc32(body[begin:end]), "08x")
            self.assertEqual(header["__metadata__"][f"crc32:{name}"], crc)
        self.assertEqual(body[:4], struct.pack("<f", 1.5), "little-endian data")

    def test_corruption_is_detected_and_named(self):
        tensorfile.write(self.path, self.sample())
        data = bytearray(pathlib.Path(self.path).read_bytes())
        data[-5] ^= 0xFF  # inside 'scalar'
        pathlib.Path(self.path).write_bytes(bytes(data))
        with self.assertRaisesRegex(TensorFileError, r"'scalar': checksum mismatch.*corrupt"):
            tensorfile.read(self.path)

    def test_truncated_and_malformed_files(self):
        tensorfile.write(self.path, self.sample())
        data = pathlib.Path(self.path).read_bytes()
        cases = {
            data[:5]: "too short",
            data[:-4]: "do not hold",
            struct.pack("<Q", 10 ** 6) + data[8:]: "does not fit",
            struct.pack("<Q", 8) + b"not json": "not valid JSON",
            data + b"xxxx": "belong to no tensor",
        }
        for bad, message in cases.items():
            with self.subTest(message=message):
                with self.assertRaisesRegex(TensorFileError, message):
                    tensorfile.decode(bad, "bad.safetensors")

    def test_foreign_safetensors_without_format_is_rejected(self):
        header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})
        data = struct.pack("<Q", len(header)) + header.encode() + b"\0\0\0\0"
        with self.assertRaisesRegex(TensorFileError, "not a Cleave tensor file"):
            tensorfile.decode(data)

    def test_bad_tensors_are_refused_before_writing(self):
        cases = [({"a": Tensor("F32", (2,), b"\0" * 4)}, "expected 8"),
                 ({"a": Tensor("Q8", (1,), b"\0")}, "unknown dtype"),
                 ({"__metadata__": Tensor("F32", (1,), b"\0" * 4)}, "bad tensor name")]
        for tensors, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(TensorFileError, message):
                    tensorfile.write(self.path, tensors)
                self.assertFalse(os.path.exists(self.path))
        with self.assertRaisesRegex(TensorFileError, "reserved"):
            tensorfile.write(self.path, {}, {"crc32:a": "0"})

    def test_write_is_atomic_and_leaves_no_temporary_files(self):
        tensorfile.write(self.path, self.sample())
        before = pathlib.Path(self.path).read_bytes()
        with self.assertRaises(TensorFileError):
            tensorfile.write(self.path, {"a": Tensor("F32", (2,), b"")})
        self.assertEqual(pathlib.Path(self.path).read_bytes(), before)
        self.assertEqual(os.listdir(self.dir.name), ["t.safetensors"])


if __name__ == "__main__":
    unittest.main()
