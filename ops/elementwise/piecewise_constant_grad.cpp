// Floor, Ceil, Round and Sign: piecewise constant, so their derivative is zero wherever it
// exists, and PyTorch's autograd takes it as zero everywhere. Nothing flows back: the rule
// emits no node, and an input reached only through them gets the builder's zeros (or none, as
// the GradientSpec asks). Integer outputs (Sign of an integer) already cut the path.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void no_gradient(GradientContext&) {}

DPRUN_REGISTER_GRADIENT({.op_type = "Floor", .since = 1, .rule = no_gradient});
DPRUN_REGISTER_GRADIENT({.op_type = "Ceil", .since = 1, .rule = no_gradient});
DPRUN_REGISTER_GRADIENT({.op_type = "Round", .since = 11, .rule = no_gradient});
DPRUN_REGISTER_GRADIENT({.op_type = "Sign", .since = 9, .rule = no_gradient});

}  // namespace
}  // namespace dprun
