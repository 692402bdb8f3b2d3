// Loads a model, wraps it in DataParallel over two CPU devices and runs one batch.
// usage: dprun_example MODEL.onnx
#include <dprun/engine/parallel/data_parallel.h>
#include <dprun/loader/onnx_loader.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  try {
    auto model = std::make_shared<dprun::Model>(dprun::load_model(argv[1], dprun::Device::cpu(0)));
    dprun::DataParallelOptions options;
    options.device_ids = {dprun::Device::cpu(0), dprun::Device::cpu(1)};
    dprun::DataParallel parallel(model, options);

    // One batch of 6 rows of zeros for every input (symbolic dims become 6).
    std::vector<dprun::Tensor> inputs;
    for (const dprun::TensorType& type : model->input_types()) {
      dprun::Shape shape;
      for (const dprun::Dim& d : *type.shape) shape.push_back(d.is_known() ? d.value : 6);
      inputs.push_back(dprun::Tensor::zeros(shape, type.dtype));
    }
    std::vector<dprun::Tensor> outputs = parallel.forward(inputs);
    dprun::DataParallelRun run = parallel.last_run();
    for (size_t i = 0; i < run.devices_used.size(); ++i)
      std::printf("%s ran %lld rows\n", run.devices_used[i].to_string().c_str(),
                  static_cast<long long>(run.chunk_rows[i]));
    for (size_t i = 0; i < outputs.size(); ++i)
      std::printf("%s: %s\n", model->output_names()[i].c_str(), outputs[i].describe().c_str());
    return 0;
  } catch (const dprun::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
