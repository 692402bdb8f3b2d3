"""Bad inputs, options and devices raise dprun.Error with one line naming the problem, the line
the CLI prints after "dprun: error: " where the CLI has the same case; the interpreter lives on."""
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import MODELS, cli_path

X = np.zeros((2, 16), np.float32)


def classifier(**options):
    import dprun
    return dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0"],
                              **options)


def raises_exactly(message):
    import dprun
    return pytest.raises(dprun.Error, match="^" + re.escape(message) + "$")


def cli_error(tmp_path, array):
    """The message `dprun run` prints for the classifier fed `array` as x."""
    np.save(tmp_path / "x.npy", array)
    done = subprocess.run([cli_path(), "run", MODELS / "tutorial/classifier.onnx", "--devices",
                           "cpu:0", "--input", f"x={tmp_path / 'x.npy'}"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    return done.stderr.strip().removeprefix("dprun: error: ")


def test_wrong_dtype_is_the_clis_message(tmp_path):
    wrong = X.astype(np.float64)
    message = "input 'x' expects dtype float32 but got float64"
    assert cli_error(tmp_path, wrong) == message
    with raises_exactly(message):
        classifier()(wrong)


def test_wrong_rank_is_the_clis_message(tmp_path):
    wrong = np.zeros(16, np.float32)
    message = "input 'x' expects shape [batch, 16] but got [16]"
    assert cli_error(tmp_path, wrong) == message
    with raises_exactly(message):
        classifier()(wrong)


def test_wrong_size():
    with raises_exactly("input 'x' expects shape [batch, 16] but got [2, 15]"):
        classifier()(np.zeros((2, 15), np.float32))


def test_missing_input():
    with raises_exactly("input 'x' is missing"):
        classifier()()
    with raises_exactly("input 'x' is missing"):
        classifier().forward_dict({})


def test_unknown_input_name():
    with raises_exactly("the model has no input named 'y'"):
        classifier()(y=X)


def test_too_many_inputs():
    with raises_exactly("the model takes 1 input but got 2"):
        classifier()(X, X)


def test_input_given_twice():
    with raises_exactly("input 'x' is given twice"):
        classifier()(X, x=X)


def test_not_an_array():
    with raises_exactly("input 'x': a list is not an array; give a NumPy array, a CPU torch "
                        "tensor or any object with the buffer protocol, __array__ or "
                        "__dlpack__"):
        classifier()([[0.0] * 16])


def test_big_endian_arrays_are_refused():
    import dprun
    with pytest.raises(dprun.Error, match="^input 'x': elements of format '>f' have no dprun"):
        classifier()(X.astype(">f4"))


def test_unknown_keyword():
    with raises_exactly("DataParallel got an unexpected keyword 'devices' (it takes: device_ids, "
                        "output_device, dim, split, split_policy, weights, threads, allow_tf32, "
                        "allow_winograd, precision)"):
        classifier(devices="cpu:0")


def test_bad_device():
    import dprun
    model = dprun.load(MODELS / "mlp.onnx")
    with pytest.raises(dprun.Error, match=r"^device_ids: .*tpu:0"):
        dprun.DataParallel(model, ["tpu:0"])
    with pytest.raises(dprun.Error, match=r"^device_ids: an item of type float is no device"):
        dprun.DataParallel(model, [0.5])
    with pytest.raises(dprun.Error, match=r"^device_ids: .*twice"):
        dprun.DataParallel(model, ["cpu:0", "cpu:0"])


def test_cuda_without_cuda_names_the_device():
    import dprun
    if any(d.startswith("cuda") for d in dprun.all_devices()):
        pytest.skip("a GPU is present: cuda:0 is a usable device here")
    with pytest.raises(dprun.Error, match=r"^device cuda:0: "):
        dprun.DataParallel(dprun.load(MODELS / "mlp.onnx"), [0])


def test_bad_option_values():
    with raises_exactly("split_policy: unknown split policy 'fair' (expected chunk, even or "
                        "weighted)"):
        classifier(split_policy="fair")
    with raises_exactly("weights needs split_policy='weighted'"):
        classifier(weights=[1])
    with raises_exactly("precision: 'float8' is not float32, float16 or bfloat16"):
        classifier(precision="float8")
    with raises_exactly("DataParallel: threads must be an integer, got str"):
        classifier(threads="2")


def test_closed_model():
    import dprun
    model = dprun.load(MODELS / "mlp.onnx")
    model.close()
    message = f"the model {MODELS / 'mlp.onnx'} is closed"
    with raises_exactly(message):
        dprun.DataParallel(model, ["cpu:0"])
    with raises_exactly(message):
        model.input_names


def test_closed_data_parallel():
    dp = classifier()
    with dp:
        dp(X)
    with pytest.raises(Exception, match="is closed"):
        dp(X)


def test_no_crash_on_bad_inputs_in_a_fresh_interpreter():
    """Every bad input above, in a child interpreter: it exits normally."""
    code = (
        "import dprun, numpy as np\n"
        f"dp = dprun.DataParallel(dprun.load({str(MODELS / 'tutorial/classifier.onnx')!r}), "
        "['cpu:0', 'cpu:1'])\n"
        "bad = [np.zeros(16), np.zeros((2, 15), np.float32), 'text', None, object(), "
        "np.zeros((0, 16), np.float32), np.zeros((2, 16), np.float32)[:, ::2], b'abc']\n"
        "for x in bad:\n"
        "    try: dp(x)\n"
        "    except dprun.Error as e: assert '\\n' not in str(e)\n"
        "print('alive')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive"
