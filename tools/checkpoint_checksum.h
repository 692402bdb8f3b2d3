#pragma once
// The checksum of a `dprun train` checkpoint, under the CLI's namespace: the library's
// (engine/training/checkpoint_checksum.h), which tests use to seal a checkpoint they edit.
#include "engine/training/checkpoint_checksum.h"

namespace dprun::cli {

using dprun::checkpoint_checksum;
using dprun::kCheckpointChecksum;

}  // namespace dprun::cli
