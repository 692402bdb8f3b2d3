#pragma once
// dprun.Trainer: training from Python batches (NumPy arrays, torch tensors from a DataLoader)
// as `dprun train` trains from .npy files, through TrainingSession.
#include <pybind11/pybind11.h>

namespace dprun::python {

/// Registers Trainer.
void register_trainer(pybind11::module_& m);

}  // namespace dprun::python
