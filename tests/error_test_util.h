#pragma once
// The message of the Error a piece of test code throws, for exact comparisons.
#include <string>

#include "engine/error.h"

namespace dprun::testing {

/// What f() throws as Error, or "no error" when it returns.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace dprun::testing
