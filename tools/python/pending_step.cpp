#include "tools/python/pending_step.h"

namespace py = pybind11;

namespace dprun::python {

void register_pending_step(py::module_& m) {
  py::class_<PendingStep>(m, "PendingStep",
                          "A step started by Trainer.step_async; the Trainer's next call, or "
                          "result(), waits for it.")
      .def(
          "result",
          [](PendingStep& p) -> py::object {
            if (!p.outcome->settled) p.settle();
            if (p.outcome->error) {
              p.outcome->error_raised = true;
              std::rethrow_exception(p.outcome->error);
            }
            return p.outcome->loss ? py::object(py::float_(*p.outcome->loss)) : py::none();
          },
          "Waits for the step and returns its loss (None for a batch kept for accumulate); "
          "raises dprun.Error when the step failed.")
      .def(
          "done", [](const PendingStep& p) { return p.outcome->settled || p.finished(); },
          "Whether the step has finished, without waiting.");
}

}  // namespace dprun::python
