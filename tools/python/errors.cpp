#include "tools/python/errors.h"

#include <exception>
#include <new>
#include <sstream>

#include "engine/error.h"

namespace py = pybind11;

namespace dprun::python {

namespace {
// The exception type, created once and kept for the life of the process (the module holds a
// reference too).
PyObject* g_error_type = nullptr;

// One line: each newline of a multi-line message becomes "; ", trailing blanks go.
std::string flattened(const std::string& text) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
  std::ostringstream out;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n')
      out << "; ";
    else
      out << text[i];
  }
  return out.str();
}

void set_error(const char* message) {
  PyErr_SetString(g_error_type, flattened(message).c_str());
}
}  // namespace

void register_errors(py::module_& m) {
  g_error_type = PyErr_NewExceptionWithDoc(
      "dprun.Error",
      "Every error dprun raises: a bad input, option, device or model, or a failure while the "
      "devices run. The message is the one line the command line prints.",
      PyExc_RuntimeError, nullptr);
  if (g_error_type == nullptr) throw py::error_already_set();
  m.add_object("Error", py::handle(g_error_type));
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own (TypeError for a bad argument): it sets them itself
    } catch (const py::error_already_set&) {
      throw;  // a Python exception passing through (KeyboardInterrupt): kept as it is
    } catch (const std::bad_alloc&) {
      set_error("out of memory");
    } catch (const std::exception& e) {
      set_error(e.what());
    }
  });
}

void raise(const std::string& message) {
  throw Error(message);
}

std::string one_line(const py::error_already_set& error) {
  std::ostringstream text;
  text << (error.type() ? std::string(py::str(error.type().attr("__name__"))) : "error") << ": "
       << std::string(py::str(error.value()));
  return flattened(text.str());
}

}  // namespace dprun::python
