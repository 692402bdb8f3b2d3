#pragma once
// Arrays between Python and dprun: any object with the buffer protocol, __dlpack__ or
// __array__ as a dprun::Tensor (read in place when it is C-contiguous), and dprun tensors as
// NumPy arrays that own their memory.
#include <pybind11/pybind11.h>

#include <string>

#include "engine/shape.h"
#include "engine/tensor.h"

namespace dprun::python {

/// `object` as a host tensor for the value `name` declared as `declared` (its dtype decides how
/// a 2-byte unsigned array is read: as bfloat16 bits for a bfloat16 value). A C-contiguous
/// array is read in place: the tensor keeps the object's buffer (and so the object) alive and
/// shares its memory, which must not change while the tensor is used. Another layout is copied
/// into a C-contiguous tensor. NumPy arrays, bytes, memoryview and array.array have the buffer
/// protocol; CPU torch tensors come through __dlpack__ (numpy.from_dlpack) or __array__, both
/// without a copy. Throws Error "NAME: ..." for an object that is no array, an element type
/// dprun has no dtype for, or a torch tensor that will not export (on a GPU, requires_grad).
/// The dtype and shape are not checked against `declared` here (check_input does that).
Tensor tensor_from_python(const pybind11::handle& object, const std::string& name,
                          const TensorType& declared);

/// A NumPy array holding `tensor`'s values (copied to the host if it is not there). The array
/// owns its memory: it keeps the tensor's storage, which nothing else writes after the call.
/// Float16 becomes numpy.float16, bfloat16 float32, strings an object array of str.
pybind11::object numpy_from_tensor(const Tensor& tensor);

}  // namespace dprun::python
