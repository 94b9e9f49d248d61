"""The Python side reads the same element-type table as the runtime.

cleave.dtypes parses include/cleave/Runtime/DTypes.def; libCleaveRuntime is
compiled from it. These tests ask the compiled runtime (through its C ABI,
with ctypes) about every code and every tensor-file dtype and compare its
answers with the Python table, so the two cannot drift apart.
"""

import ctypes
import os
import tempfile
import unittest

from cleave import dtypes, tensorfile
from cleave.tensorfile import Tensor


def runtime():
    path = os.environ.get("CLEAVE_RUNTIME_LIB")
    if not path:
        raise unittest.SkipTest("CLEAVE_RUNTIME_LIB is not set (ctest sets it)")
    lib = ctypes.CDLL(path)
    lib.cleave_rt_dtype_size.restype = ctypes.c_int64
    lib.cleave_rt_dtype_size.argtypes = [ctypes.c_int32]
    lib.cleave_rt_dtype_name.restype = ctypes.c_char_p
    lib.cleave_rt_dtype_name.argtypes = [ctypes.c_int32]
    lib.cleave_tensor_file_open.restype = ctypes.c_void_p
    lib.cleave_tensor_file_open.argtypes = [ctypes.c_char_p]
    lib.cleave_tensor_file_close.argtypes = [ctypes.c_void_p]
    lib.cleave_tensor_file_info.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64 * 8)]
    lib.cleave_rt_error_message.restype = ctypes.c_char_p
    return lib


class DTypeTableTest(unittest.TestCase):
    def test_codes_names_and_sizes_match_the_compiled_runtime(self):
        lib = runtime()
        by_code = {d.code: d for d in dtypes.DTYPES}
        for code in range(-2, max(by_code) + 4):
            with self.subTest(code=code):
                size = lib.cleave_rt_dtype_size(code)
                name = lib.cleave_rt_dtype_name(code)
                if code in by_code:
                    self.assertEqual(size, by_code[code].bytes)
                    self.assertEqual(name.decode(), by_code[code].name)
                else:
                    self.assertEqual(size, 0)
                    self.assertIsNone(name)

    def test_file_names_read_back_as_the_same_codes(self):
        lib = runtime()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "all.safetensors")
            tensors = {d.name: Tensor(d.file_name, (3,), bytes(3 * d.bytes))
                       for d in dtypes.DTYPES}
            tensorfile.write(path, tensors)
            handle = lib.cleave_tensor_file_open(path.encode())
            self.assertTrue(handle, lib.cleave_rt_error_message())
            try:
                for d in dtypes.DTYPES:
                    code, rank = ctypes.c_int32(-1), ctypes.c_int64(0)
                    shape = (ctypes.c_int64 * 8)()
                    rc = lib.cleave_tensor_file_info(handle, d.name.encode(), ctypes.byref(code),
                                                     ctypes.byref(rank), ctypes.byref(shape))
                    self.assertEqual(rc, 0, d.name)
                    self.assertEqual(code.value, d.code, d.name)
                    self.assertEqual((rank.value, shape[0]), (1, 3), d.name)
            finally:
                lib.cleave_tensor_file_close(handle)

    def test_table_is_in_code_order_with_unique_names(self):
        self.assertEqual([d.code for d in dtypes.DTYPES], list(range(len(dtypes.DTYPES))))
        for field in ("enum", "name", "file_name"):
            values = [getattr(d, field) for d in dtypes.DTYPES]
            self.assertEqual(len(values), len(set(values)), field)
        self.assertEqual(tensorfile.DTYPE_SIZES, {d.file_name: d.bytes for d in dtypes.DTYPES})

    def test_parser_rejects_a_line_it_cannot_read(self):
        with self.assertRaisesRegex(ValueError, "x.def:2: cannot read"):
            dtypes.parse('// comment\nCLEAVE_DTYPE(F32, 0, f32, "F32", 4, 1, 32)\n', "x.def")
        with self.assertRaisesRegex(ValueError, "no CLEAVE_DTYPE entries"):
            dtypes.parse("", "x.def")


if __name__ == "__main__":
    unittest.main()
