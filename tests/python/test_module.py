"""The module itself: version, the error type, loading models and describing their inputs."""
import pathlib

import pytest

from conftest import MODELS, run_cli


def test_version_is_the_clis():
    import dprun
    assert run_cli("--version").strip() == f"dprun {dprun.__version__}"


def test_error_is_a_runtime_error():
    import dprun
    assert issubclass(dprun.Error, RuntimeError)


def test_load_describes_inputs_and_outputs():
    import dprun
    model = dprun.load(MODELS / "transformer.onnx")
    assert model.input_names == ["input_ids", "attention_mask"]
    assert model.output_names == ["hidden", "pooled"]
    ids = model.inputs[0]
    assert (ids.name, ids.dtype) == ("input_ids", "int64")
    assert ids.shape[0] == "batch"  # a symbolic dim by its name
    assert model.inputs[1].dtype == "float32"


def test_load_bytes_equals_load():
    import dprun
    data = (MODELS / "mlp.onnx").read_bytes()
    model = dprun.load_bytes(data, base_dir=str(MODELS))
    assert model.input_names == dprun.load(str(MODELS / "mlp.onnx")).input_names
    assert model.path == "<bytes>"


def test_load_of_a_missing_file_names_it():
    import dprun
    with pytest.raises(dprun.Error, match="no/such.onnx"):
        dprun.load("no/such.onnx")


def test_load_of_not_a_path():
    import dprun
    with pytest.raises(dprun.Error, match=r"^load: path must be a path \(str or os.PathLike\), "
                                          r"got int$"):
        dprun.load(5)


def test_load_bytes_of_garbage():
    import dprun
    with pytest.raises(dprun.Error):
        dprun.load_bytes(b"not a model")


def test_pathlib_paths():
    import dprun
    assert dprun.load(pathlib.Path(MODELS / "mlp.onnx")).input_names == ["input"]
