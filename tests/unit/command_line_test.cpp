// tools/command_line.h: what a command's declarations parse, refuse and show as help.
#include "tools/command_line.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dprun::cli {
namespace {

struct Flags {
  std::string model;
  std::optional<int64_t> batch;
  std::optional<double> lr;
  std::optional<std::string> devices;
  std::vector<std::string> inputs;
  bool shuffle = false, no_shuffle = false;
};

std::unique_ptr<CLI::App> app_for(Flags& f) {
  auto app = command_app("usage: dprun try MODEL.onnx [options]\ntry a model", "see docs/");
  add_model_path(*app, f.model);
  add_integer(*app, "--batch", "N", f.batch, 1, 64, "rows per step");
  add_number(*app, "--lr", "F", f.lr, NumberRule::NonNegative, "the learning rate");
  add_text(*app, "--devices", "LIST", f.devices,
           "all | cpu | cpu:0,cpu:1,... | cuda:0,cuda:1,... or bare CUDA ids 0,1 (default: all, "
           "every GPU when there is one, else one CPU device per core)");
  add_texts(*app, "--input", "NAME=FILE", f.inputs, "an input; repeatable");
  CLI::Option* shuffle = add_flag(*app, "--shuffle", f.shuffle, "shuffle");
  add_flag(*app, "--no-shuffle", f.no_shuffle, "keep the order")->excludes(shuffle)->group("more");
  return app;
}

// Parses `line` (words split at spaces) and returns the flags, or the error's message.
std::string parse(const std::string& line, Flags& f) {
  std::vector<std::string> words = {"dprun"};
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  auto app = app_for(f);
  try {
    parse_command_line(*app, static_cast<int>(argv.size()), argv.data(), 1);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CommandLine, FillsTheFieldsOfWhatWasGiven) {
  Flags f;
  ASSERT_EQ(parse("m.onnx --batch=4 --lr 1e-3 --input a=1.npy --input b=2.npy --shuffle", f), "");
  EXPECT_EQ(f.model, "m.onnx");
  EXPECT_EQ(f.batch, 4);
  EXPECT_EQ(f.lr, 1e-3);
  EXPECT_EQ(f.inputs, (std::vector<std::string>{"a=1.npy", "b=2.npy"}));
  EXPECT_TRUE(f.shuffle);
  EXPECT_FALSE(f.devices.has_value());
  Flags bare;
  ASSERT_EQ(parse("m.onnx", bare), "");
  EXPECT_FALSE(bare.batch.has_value());
  EXPECT_FALSE(bare.lr.has_value());
}

TEST(CommandLine, EachMistakeIsOneLineNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"m.onnx --batch x", "--batch must be an integer, got 'x'"},
      {"m.onnx --batch 65", "--batch must be between 1 and 64, got 65"},
      {"m.onnx --lr -1", "--lr must be a number >= 0, got '-1'"},
      {"m.onnx --lr nan", "--lr must be a number, got 'nan'"},
      {"m.onnx --batch", "option '--batch' needs a value"},
      {"m.onnx --batch 2 --batch 3", "option '--batch' given more than once"},
      {"m.onnx --devcies cpu", "unknown option '--devcies' (did you mean --devices?)"},
      {"m.onnx --bogus", "unknown option '--bogus' (see --help)"},
      {"m.onnx -x", "unknown option '-x' (see --help)"},
      {"m.onnx other.onnx", "unexpected argument 'other.onnx' (see --help)"},
      {"--batch 2", "expected one model file (see --help)"},
      {"--bacth 2", "unknown option '--bacth' (did you mean --batch?)"},
      {"m.onnx --shuffle --no-shuffle", "--shuffle excludes --no-shuffle"},
  };
  for (const auto& [line, message] : cases) {
    Flags f;
    EXPECT_EQ(parse(line, f), message) << line;
  }
}

TEST(CommandLine, HelpListsEachGroupWrappedAtOneHundredColumns) {
  Flags f;
  EXPECT_EQ(command_help(*app_for(f)),
            "usage: dprun try MODEL.onnx [options]\n"
            "try a model\n"
            "\n"
            "options:\n"
            "  --batch N              rows per step\n"
            "  --lr F                 the learning rate\n"
            "  --devices LIST         all | cpu | cpu:0,cpu:1,... | cuda:0,cuda:1,... or bare "
            "CUDA ids 0,1\n"
            "                         (default: all, every GPU when there is one, else one CPU "
            "device per core)\n"
            "  --input NAME=FILE      an input; repeatable\n"
            "  --shuffle              shuffle\n"
            "\n"
            "more:\n"
            "  --no-shuffle           keep the order\n"
            "\n"
            "see docs/\n");
}

}  // namespace
}  // namespace dprun::cli
