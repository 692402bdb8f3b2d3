#pragma once
// dprun.Error, the one exception type the Python module raises, and how C++ exceptions become
// it: every exception the library throws reaches Python as dprun.Error (a RuntimeError) whose
// message is what() on one line, the line the command line prints after "dprun: error: ".
#include <pybind11/pybind11.h>

#include <string>

namespace dprun::python {

/// Adds dprun.Error to `m` and registers the translator. Called once, from the module's init.
void register_errors(pybind11::module_& m);

/// Throws dprun::Error with `message`; the translator turns it into dprun.Error.
[[noreturn]] void raise(const std::string& message);

/// The Python exception being handled (held in `error`) as one line: "TypeError: ...".
std::string one_line(const pybind11::error_already_set& error);

}  // namespace dprun::python
