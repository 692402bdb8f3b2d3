// `dprun train` on a 3 GiB .npy file keeps its resident memory far below the file's size: the
// file's pages are read as a batch's rows are gathered and given back after it, and the
// load-time checks stream over the file once, a part at a time. The file is sparse, so that the
// test costs no disk.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>

#include "cli_test_util.h"
#include "loader/training_data_files.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

// A .npy file of `descr` and `shape` whose data are all zeros and take no disk: its header,
// then a hole. Returns the header's length.
size_t write_sparse_npy(const fs::path& path, const std::string& descr, const std::string& shape,
                        size_t data_bytes) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  std::ofstream(path, std::ios::binary) << bytes;
  fs::resize_file(path, bytes.size() + data_bytes);
  return bytes.size();
}

TEST(TrainLargeData, A3GiBFileTrainsWithLittleResidentMemory) {
  const fs::path dir = scratch_path("dprun_train_large_data");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int64_t rows = int64_t(1) << 22;  // of 3x8x8 float32: 3 GiB
  const size_t row_bytes = 3 * 8 * 8 * 4;
  const std::string rows_text = std::to_string(rows);
  const size_t header = write_sparse_npy(dir / "x.npy", "<f4", "(" + rows_text + ", 3, 8, 8)",
                                         static_cast<size_t>(rows) * row_bytes);
  write_sparse_npy(dir / "y.npy", "<i8", "(" + rows_text + ",)", static_cast<size_t>(rows) * 8);
  struct stat st {};
  ASSERT_EQ(stat((dir / "x.npy").c_str(), &st), 0);
  ASSERT_EQ(st.st_size, static_cast<off_t>(header + static_cast<size_t>(rows) * row_bytes));
  ASSERT_LT(st.st_blocks * 512, 1 << 20) << "the file is not sparse here";

  const std::string train =
      "train " + source_path("models/training/cnn_bn_1dev.onnx") +
      " --input x=" + (dir / "x.npy").string() + " --target " + (dir / "y.npy").string() +
      " --loss cross_entropy --optimizer sgd --lr 0.01 --batch 64 --steps 3 --shuffle "
      "--devices cpu:0 --save " +
      (dir / "out.onnx").string();
  CommandResult r = run_dprun(train + " --json " + (dir / "out.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json report = read_json(dir / "out.json");
  ASSERT_TRUE(report.contains("peak_resident_bytes")) << report;
  const auto peak = report["peak_resident_bytes"].get<int64_t>();
  EXPECT_LT(peak, int64_t(512) << 20) << "of a " << (st.st_size >> 20) << " MiB file";

  // The check for values that are not finite reads every part: a NaN in the last row is named.
  fs::remove(dir / "out.onnx");
  {
    const int fd = open((dir / "x.npy").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    ASSERT_EQ(pwrite(fd, &nan, sizeof nan, static_cast<off_t>(st.st_size) - 4), 4);
    close(fd);
  }
  r = run_dprun(train);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "dprun: error: " + (dir / "x.npy").string() + ": row " +
                          std::to_string(rows - 1) + " holds NaN: training needs finite numbers\n");
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
  fs::remove_all(dir);
}

// Resident memory now (VmRSS), in bytes.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// An epoch over a 256 MiB file, every row gathered once: the pages of each batch's rows are
// given back after it, so that resident memory grows by about a batch, not by the file.
TEST(TrainLargeData, AnEpochGivesBackThePagesOfEachBatch) {
  const fs::path dir = scratch_path("dprun_train_large_epoch");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int64_t rows = 16384;  // of 4096 float32: 256 MiB
  write_sparse_npy(dir / "x.npy", "<f4", "(16384, 4096)", static_cast<size_t>(rows) * 16384);
  TrainingDataFiles files;
  files.input_names = {"x"};
  files.files = {{"x", (dir / "x.npy").string()}};
  files.batch = 1024;
  files.shuffle = true;
  TrainingData data = read_training_data(files);
  const int64_t before = resident_bytes();
  int64_t most = before;
  for (int64_t k = 0; k < data.batches_per_epoch(); ++k) {
    Batch b = data.batch(0, k);
    most = std::max(most, resident_bytes());
  }
  // A batch is 16 MiB (its pages and its tensor); without the release the file, 256 MiB.
  EXPECT_LT(most - before, int64_t(96) << 20);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
