"""Trainer.step_async: the steps of step(), bit for bit, each started on the Trainer's own thread
while the caller makes the next batch; PendingStep's result() and done(); a failed step raised by
result() or by the Trainer's next call; the batch's arrays held until their step has finished."""
import re
import sys
import time

import numpy as np
import pytest

from conftest import BASE, BASE_FLAGS, CLASSIFIER, X, Y, initializers, same_bits, train_cli


def test_the_steps_are_the_clis_bit_for_bit(tmp_path):
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], momentum=0.9, **BASE)
    pending = [trainer.step_async(X[i:i + 32], target=Y[i:i + 32]) for i in range(0, 128, 32)]
    losses = [p.result() for p in pending]
    trainer.save(tmp_path / "py.onnx")
    cli_losses, cli_params = train_cli(tmp_path, CLASSIFIER, {"x": X}, Y,
                                       [*BASE_FLAGS, "--momentum", "0.9",
                                        "--devices", "cpu:0,cpu:1"], 4, 32)
    assert losses == cli_losses  # exact doubles
    py_params = initializers(tmp_path / "py.onnx")
    assert sorted(py_params) == sorted(cli_params)
    assert all(same_bits(py_params[k], v) for k, v in cli_params.items())


def test_a_dataloader_loop_with_step_async_gives_steps_losses():
    torch = pytest.importorskip("torch", reason="needs PyTorch (python3-torch)")
    import dprun
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=16)
    synchronous = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], **BASE)
    expected = [synchronous.step(xb, target=yb) for xb, yb in loader]
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], **BASE)
    pending = [trainer.step_async(xb, target=yb) for xb, yb in loader]
    assert [p.result() for p in pending] == expected
    assert trainer.steps == len(expected) == 8


def test_accumulate_gives_none_until_the_nth_batch():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], accumulate=2, **BASE)
    first = trainer.step_async(X[:16], target=Y[:16])
    second = trainer.step_async(X[16:32], target=Y[16:32])
    assert first.done()  # the second call waited for it
    assert first.result() is None
    assert isinstance(second.result(), float)
    assert trainer.steps == 1 and trainer.pending == 0


def test_done_turns_true_without_result_and_the_next_call_waits():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    pending = trainer.step_async(X[:64], target=Y[:64])
    deadline = time.monotonic() + 60
    while not pending.done():
        assert time.monotonic() < deadline, "the step never finished"
        time.sleep(0.001)
    assert trainer.steps == 1  # no result() asked for: the count waits for nothing here
    pending = trainer.step_async(X[:64], target=Y[:64])
    assert trainer.steps == 2  # reading the count waited for the step
    assert pending.done()


def test_a_failed_step_raises_from_result_once_read():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    bad = Y[:16].copy()
    bad[3] = 9
    pending = trainer.step_async(X[:16], target=bad)
    message = r"^target: row 3 holds class 9, outside \[0, 4\)"
    with pytest.raises(dprun.Error, match=message):
        pending.result()
    with pytest.raises(dprun.Error, match=message):  # the same outcome, asked again
        pending.result()
    assert trainer.step(X[:16], target=Y[:16]) is not None  # raised once: the Trainer goes on
    assert trainer.steps == 1


def test_a_failed_step_not_read_raises_from_the_next_call():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    nan = X[:16].copy()
    nan[5, 0] = np.nan
    trainer.step_async(nan, target=Y[:16])
    with pytest.raises(dprun.Error, match=r"^input 'x': row 5 holds NaN"):
        trainer.step_async(X[:16], target=Y[:16])
    assert trainer.steps == 0  # neither step ran


def test_the_arrays_are_held_until_their_step_has_finished():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    x, y = X[:64].copy(), Y[:64].copy()
    before = sys.getrefcount(x), sys.getrefcount(y)
    pending = trainer.step_async(x, target=y)
    assert sys.getrefcount(x) > before[0] and sys.getrefcount(y) > before[1]
    pending.result()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_close_and_deletion_wait_for_the_step():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    pending = trainer.step_async(X[:64], target=Y[:64])
    trainer.close()
    assert pending.done() and isinstance(pending.result(), float)
    with pytest.raises(dprun.Error, match=re.escape("the Trainer is closed")):
        trainer.step_async(X[:64], target=Y[:64])
    orphan = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE).step_async(X[:64], target=Y[:64])
    assert isinstance(orphan.result(), float)  # the handle keeps its Trainer alive
