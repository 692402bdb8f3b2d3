// A library that the test plugin needs and that is not where the dynamic loader looks
// (tests/CMakeLists.txt builds it into a folder of its own and gives the plugin no path to it).
int dprun_test_absent_value() {
  return 1;
}
