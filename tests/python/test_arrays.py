"""How inputs reach the engine: C-contiguous arrays of the model's dtype are read in place,
other layouts copied; torch tensors through __dlpack__ or __array__; memory does not grow with
the input's size."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import MODELS, same_bits


def test_a_c_contiguous_array_is_read_in_place():
    import dprun
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    assert dprun._input_address(x, "float32") == x.ctypes.data
    row = x[1:]  # a view that is C-contiguous too
    assert dprun._input_address(row, "float32") == row.ctypes.data


def test_other_layouts_are_copied_and_give_the_same_outputs():
    import dprun
    x = np.load(MODELS / "tutorial/sample.x.npy")
    fortran = np.asfortranarray(x)
    assert dprun._input_address(fortran, "float32") != fortran.ctypes.data
    dp = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0", "cpu:1"])
    assert same_bits(dp(fortran), dp(x))
    strided = np.repeat(x, 2, axis=0)[::2]
    assert same_bits(dp(strided), dp(x))


def test_read_only_arrays_and_buffers():
    import dprun
    x = np.load(MODELS / "tutorial/sample.x.npy")
    dp = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0"])
    frozen = x.copy()
    frozen.setflags(write=False)
    assert same_bits(dp(frozen), dp(x))
    assert same_bits(dp(memoryview(x)), dp(x))


def test_a_gigabyte_input_is_not_copied(tmp_path):
    """In a child process: a model that sums each row of 64 floats, fed 1 GiB, grows the peak
    resident memory by less than 100 MiB (its output is 16 MiB; a copy of the input would be
    1024 MiB)."""
    onnx = pytest.importorskip("onnx", reason="building the test model needs python3-onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], "row_sums",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]),
              tmp_path / "row_sums.onnx")
    code = f"""
import resource, numpy as np, dprun
dp = dprun.DataParallel(dprun.load({str(tmp_path / 'row_sums.onnx')!r}), ['cpu:0', 'cpu:1'])
dp(np.ones((8, 64), np.float32))
x = np.ones((1 << 22, 64), np.float32)  # 1 GiB, touched
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y = dp(x)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert y.shape == (1 << 22,) and float(y[0]) == 64.0 and float(y[-1]) == 64.0
print((after - before) // 1024)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    grown_mib = int(done.stdout.split()[-1])
    assert grown_mib < 100, grown_mib


def test_torch_tensors_are_inputs():
    torch = pytest.importorskip("torch", reason="needs PyTorch (python3-torch)")
    import dprun
    x = np.load(MODELS / "tutorial/sample.x.npy")
    dp = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0", "cpu:1"])
    t = torch.from_numpy(x.copy())
    assert dprun._input_address(t, "float32") == t.data_ptr()  # in place, through __dlpack__
    assert same_bits(dp(t), dp(x))
    assert same_bits(dp(t.t().contiguous().t()), dp(x))  # a transposed layout, copied
    with pytest.raises(dprun.Error, match="^input 'x': a Tensor whose __array__ failed: "):
        dp(t.requires_grad_())


def test_bytes_of_uint8_are_an_array():
    import dprun
    assert dprun._input_address(bytearray(b"abcd"), "uint8") != 0
