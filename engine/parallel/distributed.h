// Deprecated forwarding header: DistributedDataParallel moved to
// engine/training/distributed_data_parallel.h (it trains, so it lives with training). This
// header goes in the next release; include the new one.
#pragma once
#pragma message("dprun: engine/parallel/distributed.h is deprecated; include engine/training/distributed_data_parallel.h")
#include "engine/training/distributed_data_parallel.h"
