#include "engine/training/validation.h"

#include "engine/autograd/inference_graph.h"

namespace dprun {

namespace {

std::shared_ptr<Model> evaluation_model(const Model& model, const LossSpec& loss) {
  auto graph = std::make_shared<Graph>(inference_graph(model.graph()));
  std::string output = loss.output.empty() ? graph->outputs[0].name : loss.output;
  LossNodes nodes = append_loss(*graph, loss);
  graph->outputs = {{nodes.loss, {}}, {output, graph->type_of(output).value_or(TensorType{})}};
  return share_parameters(model, graph);
}

bool is_classification(LossKind kind) {
  return kind == LossKind::CrossEntropy || kind == LossKind::Nll;
}

/// Samples whose largest score along `class_dim` sits at the target's class.
int64_t correct_predictions(const Tensor& scores, const Tensor& target, int64_t class_dim) {
  Tensor s = scores.to(Device::cpu());
  int64_t c = class_dim < 0 ? class_dim + s.rank() : class_dim;
  int64_t classes = s.dim(c), inner = 1, outer = 1;
  for (int64_t d = c + 1; d < s.rank(); ++d) inner *= s.dim(d);
  for (int64_t d = 0; d < c; ++d) outer *= s.dim(d);
  const int64_t* labels = target.data<int64_t>();
  int64_t correct = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      double best_score = s.item_as_double((o * classes) * inner + i);
      for (int64_t k = 1; k < classes; ++k) {
        double v = s.item_as_double((o * classes + k) * inner + i);
        if (v > best_score) best_score = v, best = k;
      }
      correct += best == labels[o * inner + i];
    }
  return correct;
}

}  // namespace

Validation::Validation(const Model& model, const LossSpec& loss, TrainingData data)
    : eval_(evaluation_model(model, loss)), loss_(loss), data_(std::move(data)) {}

ValidationResult Validation::run() {
  double loss_sum = 0;
  int64_t rows = 0, correct = 0, predictions = 0;
  for (int64_t k = 0; k < data_.batches_per_epoch(); ++k) {
    Batch b = data_.batch(0, k);
    std::vector<Tensor> feeds = b.inputs;
    if (b.target.defined()) feeds.push_back(b.target);
    std::vector<Tensor> outputs = eval_->run(feeds);
    // The loss may sit on an accelerator.
    loss_sum += outputs[0].to(Device::cpu()).item_as_double() * static_cast<double>(b.rows);
    rows += b.rows;
    if (is_classification(loss_.kind)) {
      correct += correct_predictions(outputs[1], b.target, loss_.class_dim);
      predictions += b.target.numel();
    }
  }
  ValidationResult result;
  result.loss = loss_sum / static_cast<double>(rows);
  if (predictions)
    result.accuracy = static_cast<double>(correct) / static_cast<double>(predictions);
  return result;
}

}  // namespace dprun
