#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""DLPack between cudamem and CuPy, both ways, through the shared library built from dlpack_exchange.cpp.

cudamem -> CuPy: the library exports device buffers (1D floats, pitched 2D int32 rows) as DLManagedTensor
pointers; each is wrapped in a PyCapsule named "dltensor" and handed to cupy.from_dlpack, which must see the
dtype, shape, strides and values computed here with NumPy; dropping the CuPy array must free the buffer once.
CuPy -> cudamem: CuPy arrays (contiguous, a 2D slice with a row stride, a strided 1D slice) go out through
__dlpack__(); the library imports them as cudamem views, copies them to host memory, and the values must equal
CuPy's; the refusals must name their rule.

Usage: cupy_dlpack.py <path of the exchange library>. Exits 77 (CTest: skipped) without CuPy or a GPU.
"""

import ctypes
import gc
import sys

SKIP = 77
K_DL_CUDA = 2  # DLDeviceType kDLCUDA
K_DL_INT, K_DL_FLOAT = 0, 2  # DLDataTypeCode


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


failures = []


def check(condition, what):
    print(("ok:   " if condition else "FAIL: ") + what)
    if not condition:
        failures.append(what)


def capsule_api():
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_SetName.restype = ctypes.c_int
    api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api


class Exported:
    """A cudamem tensor as the object cupy.from_dlpack takes: __dlpack__ gives the capsule, once."""

    def __init__(self, api, pointer):
        self.api, self.pointer = api, pointer
        self.tensor = ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor)).contents.dl_tensor

    def __dlpack_device__(self):
        return (self.tensor.device.device_type, self.tensor.device.device_id)

    def __dlpack__(self, stream=None, **_):  # the data is complete: cudamem's copies synchronize
        pointer, self.pointer = self.pointer, None
        return self.api.PyCapsule_New(pointer, b"dltensor", None)


def consumed_pointer(api, array):
    """The DLManagedTensor* of array.__dlpack__(), the capsule marked used: the callee owns the tensor now."""
    capsule = array.__dlpack__()
    pointer = api.PyCapsule_GetPointer(capsule, b"dltensor")
    api.PyCapsule_SetName(capsule, b"used_dltensor")
    return pointer


def load(path):
    lib = ctypes.PyDLL(path)  # PyDLL keeps the GIL: CuPy's deleters, called from the library, need it
    out_tensor = ctypes.POINTER(ctypes.c_void_p)
    lib.cudamem_test_last_error.restype = ctypes.c_char_p
    lib.cudamem_test_freed.restype = ctypes.c_int
    lib.cudamem_test_export_floats.argtypes = [ctypes.c_int64, out_tensor]
    lib.cudamem_test_export_rows.argtypes = [ctypes.c_int64, ctypes.c_int64, out_tensor]
    lib.cudamem_test_import_floats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                               ctypes.POINTER(ctypes.c_int64)]
    lib.cudamem_test_import_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                             ctypes.POINTER(ctypes.c_int64)]
    return lib


def cudamem_to_cupy(cupy, np, lib, api):
    freed_before = lib.cudamem_test_freed()
    pointer = ctypes.c_void_p()
    if lib.cudamem_test_export_floats(1000, ctypes.byref(pointer)) != 0:
        return check(False, "export_floats: " + lib.cudamem_test_last_error().decode())
    exported = Exported(api, pointer.value)
    t = exported.tensor
    check((t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes) == (K_DL_CUDA, K_DL_FLOAT, 32, 1),
          "1D export: kDLCUDA, float32")
    array = cupy.from_dlpack(exported)
    check(array.dtype == cupy.float32 and array.shape == (1000,), f"CuPy sees float32 (1000,): {array.dtype} {array.shape}")
    expected = np.arange(1000, dtype=np.float32) * np.float32(0.5) - np.float32(3)
    check(np.array_equal(cupy.asnumpy(array), expected), "CuPy reads the values cudamem wrote")
    check(float((array * 2).sum()) == float((expected * 2).sum()), "CuPy computes on them")
    check(lib.cudamem_test_freed() == freed_before, "the buffer lives while CuPy holds it")
    del array, exported
    gc.collect()
    check(lib.cudamem_test_freed() == freed_before + 1, "dropping the CuPy array frees the buffer once")

    width, height = 37, 9
    if lib.cudamem_test_export_rows(width, height, ctypes.byref(pointer)) != 0:
        return check(False, "export_rows: " + lib.cudamem_test_last_error().decode())
    exported = Exported(api, pointer.value)
    row_stride = exported.tensor.strides[0]
    check(row_stride > width and exported.tensor.strides[1] == 1, f"2D export: strides ({row_stride}, 1), padded rows")
    rows = cupy.from_dlpack(exported)
    check(rows.shape == (height, width) and rows.dtype == cupy.int32, f"CuPy sees int32 {rows.shape}")
    check(rows.strides == (row_stride * 4, 4), f"CuPy keeps the pitch: strides {rows.strides}")
    expected = np.add.outer(np.arange(height) * 1000, np.arange(width)).astype(np.int32)
    check(np.array_equal(cupy.asnumpy(rows), expected), "CuPy reads every pitched row")
    check(np.array_equal(cupy.asnumpy(rows[3:7, 10:20].sum(axis=1)), expected[3:7, 10:20].sum(axis=1)),
          "CuPy slices and reduces the rows")
    del rows, exported
    gc.collect()
    check(lib.cudamem_test_freed() == freed_before + 2, "dropping the CuPy rows frees them once")


def cupy_to_cudamem(cupy, np, lib, api):
    count = ctypes.c_int64()
    values = cupy.arange(500, dtype=cupy.float32) * 1.5 + 2
    out = np.zeros(500, dtype=np.float32)
    rc = lib.cudamem_test_import_floats(consumed_pointer(api, values), out.ctypes.data, out.size, ctypes.byref(count))
    check(rc == 0 and count.value == 500, f"1D import: {lib.cudamem_test_last_error().decode() if rc else count.value}")
    check(np.array_equal(out, cupy.asnumpy(values)), "cudamem reads the values CuPy wrote")

    grid = cupy.arange(12 * 40, dtype=cupy.int32).reshape(12, 40) * 7
    window = grid[2:10, 5:30]  # rows 40 elements apart: a pitched view of 25 columns
    out = np.zeros(8 * 25, dtype=np.int32)
    shape = (ctypes.c_int64 * 3)()
    rc = lib.cudamem_test_import_rows(consumed_pointer(api, window), out.ctypes.data, out.size, shape)
    check(rc == 0, "2D import of a slice: " + (lib.cudamem_test_last_error().decode() if rc else "accepted"))
    check(tuple(shape) == (25, 8, 160), f"cudamem sees 25 x 8 rows, pitch 160 bytes: {tuple(shape)}")
    check(np.array_equal(out.reshape(8, 25), cupy.asnumpy(window)), "cudamem reads the slice's rows")

    rc = lib.cudamem_test_import_floats(consumed_pointer(api, values[::2]), out.ctypes.data, 0, ctypes.byref(count))
    message = lib.cudamem_test_last_error().decode()
    check(rc != 0 and "not adjacent" in message, f"a strided 1D slice is refused: {message}")
    rc = lib.cudamem_test_import_rows(consumed_pointer(api, grid.T), out.ctypes.data, 0, shape)
    message = lib.cudamem_test_last_error().decode()
    check(rc != 0 and "not adjacent" in message, f"a transposed array is refused: {message}")
    rc = lib.cudamem_test_import_floats(consumed_pointer(api, grid[0]), out.ctypes.data, 0, ctypes.byref(count))
    message = lib.cudamem_test_last_error().decode()
    check(rc != 0 and "dtype" in message, f"int32 as float is refused: {message}")
    check(float(values.sum()) == float(np.arange(500, dtype=np.float32).sum() * 1.5 + 1000),
          "the CuPy arrays are intact after cudamem released them")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import cupy
        import numpy as np
    except ImportError as e:
        print(f"skipped: CuPy is not importable ({e})")
        return SKIP
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver or device
        print(f"skipped: no CUDA device ({e})")
        return SKIP
    if devices == 0:
        print("skipped: no CUDA device")
        return SKIP
    lib = load(sys.argv[1])
    api = capsule_api()
    cudamem_to_cupy(cupy, np, lib, api)
    cupy_to_cudamem(cupy, np, lib, api)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
