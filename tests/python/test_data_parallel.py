"""dprun.DataParallel against `dprun run`: the same outputs, bit for bit, on the bundled models
and several device counts; calling conventions; what each option changes."""
import numpy as np
import pytest

from conftest import MODELS, run_cli, same_bits

# model -> its inputs, from the bundled files, tiled to 7 rows so that 2 and 3 devices get
# uneven chunks.
BUNDLED = {
    "cnn.onnx": {"image": "cnn.input.image.npy"},
    "mlp.onnx": {"input": "mlp.input.input.npy"},
    "transformer.onnx": {"input_ids": "transformer.input.input_ids.npy",
                         "attention_mask": "transformer.input.attention_mask.npy"},
    "tutorial/classifier.onnx": {"x": "tutorial/sample.x.npy"},
}


def rows7(array):
    return np.ascontiguousarray(np.concatenate([array, array])[:7])


def cli_outputs(tmp_path, model, feeds, devices):
    args = ["run", MODELS / model, "--devices", devices, "--output-dir", tmp_path / "out"]
    for name, array in feeds.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    run_cli(*args)
    return args


@pytest.mark.parametrize("model", sorted(BUNDLED))
@pytest.mark.parametrize("devices", ["cpu:0", "cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2"])
def test_outputs_equal_the_clis_bit_for_bit(tmp_path, model, devices):
    import dprun
    feeds = {name: rows7(np.load(MODELS / file)) for name, file in BUNDLED[model].items()}
    cli_outputs(tmp_path, model, feeds, devices)
    dp = dprun.DataParallel(dprun.load(MODELS / model), device_ids=devices.split(","))
    outputs = dp.forward_dict(feeds)
    assert list(outputs) == dp.output_names
    for name, array in outputs.items():
        expected = np.load(tmp_path / "out" / f"{name}.npy")
        assert same_bits(array, expected), name
    assert dp.last_run["chunk_rows"] == {1: [7], 2: [4, 3], 3: [3, 3, 1]}[devices.count(",") + 1]


def test_positional_keyword_and_dict_calls_agree():
    import dprun
    ids = np.load(MODELS / "transformer.input.input_ids.npy")
    mask = np.load(MODELS / "transformer.input.attention_mask.npy")
    dp = dprun.DataParallel(dprun.load(MODELS / "transformer.onnx"), ["cpu:0", "cpu:1"])
    hidden, pooled = dp(ids, mask)
    by_name = dp(attention_mask=mask, input_ids=ids)
    mixed = dp(ids, attention_mask=mask)
    as_dict = dp.forward_dict({"input_ids": ids, "attention_mask": mask})
    assert isinstance(by_name, tuple) and len(by_name) == 2
    for outputs in (by_name, mixed, (as_dict["hidden"], as_dict["pooled"])):
        assert same_bits(outputs[0], hidden) and same_bits(outputs[1], pooled)


def test_one_output_is_an_array_that_owns_its_memory():
    import dprun
    x = np.load(MODELS / "mlp.input.input.npy")
    dp = dprun.DataParallel(dprun.load(MODELS / "mlp.onnx"), ["cpu:0"])
    first = dp(x)
    assert isinstance(first, np.ndarray) and first.dtype == np.float32
    kept = first.copy()
    second = dp(x * 2)
    assert same_bits(first, kept)  # a later call does not write into an earlier output
    assert not same_bits(first, second)
    del dp
    assert same_bits(first, kept)  # outputs outlive the DataParallel


def test_device_ids_forms():
    import dprun
    model = dprun.load(MODELS / "mlp.onnx")
    assert dprun.DataParallel(model, "cpu:0,cpu:1").device_ids == ["cpu:0", "cpu:1"]
    assert dprun.DataParallel(model, ("cpu:1",)).device_ids == ["cpu:1"]
    assert dprun.DataParallel(model, "all").device_ids == dprun.all_devices()
    assert dprun.DataParallel(model).device_ids == dprun.all_devices()
    x = np.load(MODELS / "mlp.input.input.npy")
    assert same_bits(dprun.DataParallel(model, [])(x), dprun.DataParallel(model, ["cpu:0"])(x))


def test_a_path_is_a_model():
    import dprun
    x = np.load(MODELS / "mlp.input.input.npy")
    assert same_bits(dprun.DataParallel(str(MODELS / "mlp.onnx"), ["cpu:0"])(x),
                     dprun.DataParallel(dprun.load(MODELS / "mlp.onnx"), ["cpu:0"])(x))


# One test per option: each changes what it should.

def test_dim_splits_along_another_dim():
    import dprun
    x = np.load(MODELS / "tutorial/sample.x.npy")  # [8, 16]
    dp = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0", "cpu:1"],
                            dim=0)
    dp(x)
    assert dp.last_run["chunk_rows"] == [4, 4]
    split_policy = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"),
                                      ["cpu:0", "cpu:1"], dim=-2)
    assert same_bits(split_policy(x), dp(x))  # -2 is dim 0 of a 2-d input
    assert split_policy.last_run["chunk_rows"] == [4, 4]


def test_split_policy_even():
    import dprun
    x = rows7(np.load(MODELS / "mlp.input.input.npy"))[:5]
    model = dprun.load(MODELS / "mlp.onnx")
    chunk = dprun.DataParallel(model, ["cpu:0", "cpu:1", "cpu:2"])
    even = dprun.DataParallel(model, ["cpu:0", "cpu:1", "cpu:2"], split_policy="even")
    chunk(x)
    even(x)
    assert chunk.last_run["chunk_rows"] == [2, 2, 1]
    assert even.last_run["chunk_rows"] == [2, 2, 1]
    x4 = np.concatenate([x, x])[:4]
    chunk(x4)
    even(x4)
    assert chunk.last_run["chunk_rows"] == [2, 2]  # torch.chunk: ceil(4/3) = 2 rows, 2 chunks
    assert even.last_run["chunk_rows"] == [2, 1, 1]


def test_weights_share_the_rows():
    import dprun
    x = np.concatenate([np.load(MODELS / "tutorial/sample.x.npy")] * 2)  # 16 rows
    dp = dprun.DataParallel(dprun.load(MODELS / "tutorial/classifier.onnx"), ["cpu:0", "cpu:1"],
                            split_policy="weighted", weights=[3, 1])
    dp(x)
    assert dp.last_run["chunk_rows"] == [12, 4]


def test_split_none_gives_an_input_whole():
    import dprun
    ids = np.load(MODELS / "transformer.input.input_ids.npy")
    mask = np.load(MODELS / "transformer.input.attention_mask.npy")
    model = dprun.load(MODELS / "transformer.onnx")
    with pytest.raises(dprun.Error):  # the mask whole beside split ids: its rows do not fit
        dprun.DataParallel(model, ["cpu:0", "cpu:1"], split={"attention_mask": None})(ids, mask)


def test_threads_and_output_device_and_precision():
    import dprun
    x = np.load(MODELS / "mlp.input.input.npy")
    model = dprun.load(MODELS / "mlp.onnx")
    reference = dprun.DataParallel(model, ["cpu:0", "cpu:1"])(x)
    assert same_bits(dprun.DataParallel(model, ["cpu:0", "cpu:1"], threads=1)(x), reference)
    assert same_bits(dprun.DataParallel(model, ["cpu:0", "cpu:1"], output_device="cpu:1")(x),
                     reference)
    assert same_bits(dprun.DataParallel(model, ["cpu:0"], allow_tf32=True)(x), reference[:4])
    half = dprun.DataParallel(model, ["cpu:0"], precision="bfloat16")(x)
    assert half.dtype == np.float32 and not same_bits(half, reference)
    assert np.argmax(half, 1).tolist() == np.argmax(reference, 1).tolist()


def test_precision_equals_the_clis(tmp_path):
    import dprun
    x = np.load(MODELS / "mlp.input.input.npy")
    np.save(tmp_path / "x.npy", x)
    run_cli("run", MODELS / "mlp.onnx", "--devices", "cpu:0,cpu:1", "--precision", "bfloat16",
            "--input", f"input={tmp_path / 'x.npy'}", "--output-dir", tmp_path)
    dp = dprun.DataParallel(dprun.load(MODELS / "mlp.onnx"), ["cpu:0", "cpu:1"],
                            precision="bfloat16")
    assert same_bits(dp(x), np.load(tmp_path / "logits.npy"))


def test_the_gil_is_released_while_devices_compute():
    """A Python thread keeps running during a long call: no gap in its progress is near the
    call's length, as there would be if the call held the GIL."""
    import threading
    import time

    import dprun
    dp = dprun.DataParallel(dprun.load(MODELS / "mlp.onnx"), ["cpu:0", "cpu:1"])
    x = np.ones((1, 784), np.float32)
    dp(x)
    big = np.ones((65536, 784), np.float32)
    start = time.perf_counter()
    dp(big)
    call = time.perf_counter() - start
    stamps = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            stamps.append(time.perf_counter())

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.01)
    dp(big)
    done.set()
    ticker.join()
    gap = max(b - a for a, b in zip(stamps, stamps[1:]))
    assert call > 0.05, "the call is too short to tell"
    assert gap < call / 2, (gap, call)
