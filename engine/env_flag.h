#pragma once
// The environment switches that turn a mechanism off for measurement (DPRUN_NO_FUSION,
// DPRUN_NO_LAYOUT_REWRITE, DPRUN_NO_SHAPE_ARITHMETIC, DPRUN_NO_CUBLASLT): set to exactly "1".

namespace dprun {

/// True when the environment variable `name` is set to "1".
bool env_flag(const char* name);

}  // namespace dprun
