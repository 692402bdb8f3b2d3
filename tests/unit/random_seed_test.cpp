// Random ops without a seed attribute draw from the run's seed (RunOptions::random_seed,
// DataParallel::set_random_seed): one seed repeats, another differs, and every node and every
// replica has a stream of its own.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/random_seed.h"
#include "graph_test_util.h"

namespace dprun::testing {
namespace {

// x -> Dropout(0.5, training) -> a, x -> Dropout(0.5, training) -> b: two nodes, one input.
std::shared_ptr<Graph> two_dropouts() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 15;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(64)}}});
  g->initializers["ratio"] = Tensor::scalar<float>(0.5f);
  g->nodes.push_back(constant_node("train", Tensor::scalar<bool>(true)));
  for (const char* out : {"a", "b"}) {
    Node drop = make_node("Dropout", {"x", "ratio", "train"}, {out});
    drop.name = std::string("drop_") + out;
    g->nodes.push_back(drop);
    g->outputs.push_back({out, {}});
  }
  return g;
}

Tensor ones(int64_t rows) {
  return Tensor::from_vector<float>({rows, 64},
                                    std::vector<float>(static_cast<size_t>(rows * 64), 1));
}

TEST(RandomSeed, ASeededRunRepeatsAndEachNodeDrawsItsOwnMask) {
  Model model(two_dropouts(), Device::cpu());
  auto run = [&](std::optional<uint64_t> seed) {
    RunOptions options;
    options.random_seed = seed;
    return model.run(std::vector<Tensor>{ones(2)}, options);
  };
  const auto first = run(5), again = run(5), other = run(6);
  EXPECT_EQ(values_of<float>(first[0]), values_of<float>(again[0]));
  EXPECT_EQ(values_of<float>(first[1]), values_of<float>(again[1]));
  EXPECT_NE(values_of<float>(first[0]), values_of<float>(other[0]));
  EXPECT_NE(values_of<float>(first[0]), values_of<float>(first[1]));
  // Each element is dropped (0) or kept and scaled by 1 / (1 - 0.5).
  int kept = 0;
  for (float v : values_of<float>(first[0])) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    kept += v == 2.0f;
  }
  EXPECT_GT(kept, 32);  // of 128, about half: far from all or none
  EXPECT_LT(kept, 96);
}

TEST(RandomSeed, EachReplicaHasItsOwnStreamAndACallWithTheSeedRepeats) {
  auto model = std::make_shared<Model>(two_dropouts(), Device::cpu(0));
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cpu(1)};
  DataParallel parallel(model, options);
  parallel.set_random_seed(11);
  const std::vector<Tensor> first = parallel.forward({ones(2)});
  const std::vector<Tensor> again = parallel.forward({ones(2)});
  EXPECT_EQ(values_of<float>(first[0]), values_of<float>(again[0]));
  // Rows 0 and 1 ran on two replicas with one row each: two streams, two masks.
  const std::vector<float> a = values_of<float>(first[0]);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 64),
            std::vector<float>(a.begin() + 64, a.end()));
  // Replica 0's row is what one device running stream 0 of the seed draws for that row.
  RunOptions replica0;
  replica0.random_seed = derive_seed(11, 0);
  const std::vector<Tensor> alone = model->run(std::vector<Tensor>{ones(1)}, replica0);
  EXPECT_EQ(values_of<float>(alone[0]), std::vector<float>(a.begin(), a.begin() + 64));
}

}  // namespace
}  // namespace dprun::testing
