#pragma once
// `dprun train` stops a run whose parameters stop being numbers, before it saves them.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/training/optimizer.h"

namespace dprun::cli {

/// After the update of step `step` (counted from 1): throws naming the step and the first
/// parameter (`names`, in `optimizer`'s order) that the update left holding a NaN or an
/// infinity (Optimizer::non_finite_parameter); does nothing when all are finite. On a
/// `distributed` rank the error is a CollectiveError: every rank holds the same parameters, so
/// every rank stops at the same step.
void check_parameters_finite(const Optimizer& optimizer, const std::vector<std::string>& names,
                             int64_t step, bool distributed);

}  // namespace dprun::cli
