// Learning-rate schedules (engine/training/lr_schedule.h) against the learning rates PyTorch 1.13's
// schedulers give an SGD optimizer with lr 0.2 over 10 steps, scheduler.step() after every
// update (printed by torch.optim.lr_scheduler itself, 17 significant digits), and the command
// line's form. models/training/mlp_warmup_cosine_dp2 and mlp_step_adam check training with a
// schedule against PyTorch's (tests/cli/train_references_test.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "engine/training/lr_schedule.h"
#include "error_test_util.h"

namespace dprun {
namespace {

using testing::error_of;

void expect_lrs(const std::string& text, int64_t warmup_steps, double warmup_start,
                const std::vector<double>& pytorch) {
  SCOPED_TRACE(text);
  LrSchedule schedule = parse_lr_schedule(text);
  schedule.warmup_steps = warmup_steps;
  schedule.warmup_start_factor = warmup_start;
  for (size_t t = 0; t < pytorch.size(); ++t)
    EXPECT_NEAR(schedule.lr(0.2, static_cast<int64_t>(t), 10), pytorch[t], 1e-15) << "step " << t;
}

TEST(LrSchedule, GivesPyTorchsLearningRates) {
  expect_lrs("constant", 0, 1, std::vector<double>(10, 0.2));
  // StepLR(step_size=3, gamma=0.5)
  expect_lrs("step:3:0.5", 0, 1, {0.2, 0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025});
  // ExponentialLR(gamma=0.9)
  expect_lrs("exponential:0.9", 0, 1,
             {0.2, 0.18000000000000002, 0.16200000000000003, 0.14580000000000004,
              0.13122000000000003, 0.11809800000000004, 0.10628820000000004, 0.09565938000000004,
              0.08609344200000005, 0.07748409780000004});
  // CosineAnnealingLR(T_max=10)
  expect_lrs("cosine", 0, 1,
             {0.2, 0.19510565162951538, 0.18090169943749476, 0.15877852522924735,
              0.13090169943749477, 0.10000000000000002, 0.06909830056250528, 0.041221474770752706,
              0.01909830056250527, 0.004894348370484648});
  // SequentialLR([LinearLR(0.25, total_iters=2), CosineAnnealingLR(T_max=8, eta_min=0.01)],
  // milestones=[2])
  expect_lrs("cosine:0.01", 2, 0.25,
             {0.05, 0.125, 0.2, 0.19276855558857225, 0.172175144212722, 0.14135492607468356, 0.105,
              0.06864507392531648, 0.03782485578727799, 0.01723144441142776});
  // SequentialLR([LinearLR(1/3, total_iters=3), LinearLR(1, 0.1, total_iters=7)], [3])
  expect_lrs("linear:0.1", 3, 1.0 / 3,
             {0.06666666666666667, 0.11111111111111112, 0.15555555555555556, 0.2,
              0.1742857142857143, 0.14857142857142858, 0.12285714285714286, 0.09714285714285714,
              0.07142857142857144, 0.04571428571428572});
}

TEST(LrSchedule, NamesWhatIsWrongWithTheCommandLinesForm) {
  EXPECT_EQ(error_of([] { parse_lr_schedule("cosin"); }),
            "lr schedule 'cosin' is not constant, step:SIZE[:GAMMA], exponential:GAMMA, "
            "cosine[:ETA_MIN] or linear[:END_FACTOR]");
  EXPECT_EQ(error_of([] { parse_lr_schedule("step"); }),
            "lr schedule 'step': step takes 1 to 2 arguments");
  EXPECT_EQ(error_of([] { parse_lr_schedule("exponential:0.9:2"); }),
            "lr schedule 'exponential:0.9:2': exponential takes 1 argument");
  EXPECT_EQ(error_of([] { parse_lr_schedule("step:2.5"); }),
            "lr schedule 'step:2.5': the step size is not a positive whole number");
  EXPECT_EQ(error_of([] { parse_lr_schedule("cosine:x"); }),
            "lr schedule 'cosine:x': eta_min 'x' is not a number");
  EXPECT_EQ(error_of([] { parse_lr_schedule("linear:2"); }),
            "lr schedule: end factor 2 is not between 0 and 1");
  EXPECT_EQ(error_of([] { parse_lr_schedule("exponential:-1"); }),
            "lr schedule: gamma -1 is not a non-negative number");
  LrSchedule s;
  s.warmup_start_factor = 0;
  EXPECT_EQ(error_of([&] { s.check(); }), "lr schedule: warm-up start factor 0 is not in (0, 1]");
}

}  // namespace
}  // namespace dprun
