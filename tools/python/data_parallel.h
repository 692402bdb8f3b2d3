#pragma once
// dprun.DataParallel: PyTorch's nn.DataParallel signature over dprun::DataParallel. Inputs by
// position or by name, read in place where they can be; outputs as NumPy arrays.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/tensor.h"

namespace dprun::python {

/// The model's feeds from a call's positional and keyword arguments: positional ones in
/// input order, then keywords by input name, each converted by tensor_from_python and checked
/// against the declared dtype and shape (check_input). Throws Error "the model takes N inputs
/// but got M" (too many positional), "the model has no input named 'z'", "input 'x' is given
/// twice", "input 'x' is missing", and check_input's "input 'x' expects dtype float32 but got
/// int64" / "input 'x' expects shape [batch, 16] but got [4]".
std::vector<Tensor> feeds_of(const std::vector<const ValueInfo*>& inputs,
                             const pybind11::args& args, const pybind11::dict& kwargs);

/// Registers DataParallel.
void register_data_parallel(pybind11::module_& m);

}  // namespace dprun::python
