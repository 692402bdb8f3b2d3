// A stand-in for the CUDA plugin whose dependency cannot be found: dlopen fails naming it, as
// it names a missing libcudnn for the real plugin on a machine without cuDNN.
int dprun_test_absent_value();

int dprun_test_plugin_value() {
  return dprun_test_absent_value();
}
