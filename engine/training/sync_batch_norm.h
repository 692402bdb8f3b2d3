// Deprecated forwarding header: synchronize_batch_norms moved to
// engine/autograd/sync_batch_norm.h (a rewrite of the training graph, which autograd builds).
// This header goes in the next release; include the new one.
#pragma once
#pragma message("dprun: engine/training/sync_batch_norm.h is deprecated; include engine/autograd/sync_batch_norm.h")
#include "engine/autograd/sync_batch_norm.h"
