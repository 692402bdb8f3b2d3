#include "tools/command_line.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "tools/typo_hints.h"

namespace dprun::cli {

namespace {

constexpr size_t kHelpWidth = 100;    // columns of the generated help
constexpr size_t kOptionColumn = 25;  // where the options' descriptions start

// `words` wrapped to kHelpWidth columns, the first line starting at column `column` and the
// others at kOptionColumn.
std::string wrapped(const std::string& words, size_t column) {
  std::istringstream in(words);
  std::string out, word;
  size_t at = column;
  bool line_empty = true;
  while (in >> word) {
    if (!line_empty && at + 1 + word.size() > kHelpWidth) {
      out += "\n" + std::string(kOptionColumn, ' ');
      at = kOptionColumn;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++at;
    }
    out += word;
    at += word.size();
    line_empty = false;
  }
  return out;
}

// "  --devices LIST         all | cpu | ...": the option, its value's placeholder, its help.
std::string option_line(const CLI::Option& option) {
  std::string name = "  --" + option.get_lnames().front();
  if (option.get_items_expected_max() > 0) name += " " + option.get_type_name();  // not a flag
  if (name.size() + 2 > kOptionColumn) name += "  ";
  name.resize(std::max(name.size(), kOptionColumn), ' ');
  return name + wrapped(option.get_description(), name.size()) + "\n";
}

// The help as dprun's commands show it: usage, the groups of options in the order declared,
// the footer. CLI11's own layout is written for programs with short options and types.
class HelpLayout : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = app->get_description() + "\n";
    for (const std::string& group : app->get_groups()) {
      const auto options = app->get_options([&](const CLI::Option* o) {
        return o->get_group() == group && o->nonpositional() && !o->get_lnames().empty();
      });
      if (options.empty()) continue;
      out += "\n" + group + ":\n";
      for (const CLI::Option* option : options) out += option_line(*option);
    }
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    return out;
  }
};

// The long names of `app`'s options, "--" included, for suggestions.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) names.push_back(name);
  return names;
}

// The first word of the command line that no option of `app` took: an unknown option (with
// the nearest known one) or a positional argument too many.
UsageError unexpected_argument(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  const std::string word = extras.empty() ? std::string() : extras.front();
  if (word.rfind("--", 0) == 0) {
    const std::string name = word.substr(2, word.find('=') - 2);
    const auto close = nearest(name, option_names(app));
    return UsageError("unknown option '--" + name + "' (" +
                      (close ? "did you mean --" + *close + "?" : std::string("see --help")) + ")");
  }
  if (word.size() > 1 && word[0] == '-')
    return UsageError("unknown option '" + word + "' (see --help)");
  return UsageError("unexpected argument '" + word + "' (see --help)");
}

// CLI11's message for a value count that does not fit ("--batch: 1 required INT missing",
// "--batch: At Most 1 required but received 2") begins with the option's name.
UsageError value_count_error(const CLI::ArgumentMismatch& error) {
  const std::string message = error.what();
  const std::string name = message.substr(0, message.find(':'));
  if (message.find("missing") != std::string::npos)
    return UsageError("option '" + name + "' needs a value");
  if (message.find("At Most") != std::string::npos)
    return UsageError("option '" + name + "' given more than once");
  return UsageError(message);
}

// Runs `check` on the option's text before CLI11 converts it: the checks throw UsageError,
// which CLI11 passes through parse() unchanged, so each names its option in dprun's words.
template <class Check>
CLI::Option* checked(CLI::Option* option, Check check) {
  return option->check(CLI::Validator(
      [check](std::string& text) {
        check(text);
        return std::string();
      },
      ""));
}

}  // namespace

std::unique_ptr<CLI::App> command_app(const std::string& usage, const std::string& footer) {
  auto app = std::make_unique<CLI::App>(usage);
  app->set_help_flag();
  app->formatter(std::make_shared<HelpLayout>());
  app->option_defaults()->group("options");
  if (!footer.empty()) app->footer(footer);
  return app;
}

CLI::Option* add_model_path(CLI::App& app, std::string& path) {
  return app.add_option("model", path, "the ONNX model")->required();
}

CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& field,
                      const std::string& help) {
  return app.add_flag(name, field, help)->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

CLI::Option* add_text(CLI::App& app, const std::string& name, const std::string& value_name,
                      std::optional<std::string>& field, const std::string& help) {
  return app
      .add_option_function<std::string>(
          name, [&field](const std::string& value) { field = value; }, help)
      ->type_name(value_name);
}

CLI::Option* add_texts(CLI::App& app, const std::string& name, const std::string& value_name,
                       std::vector<std::string>& field, const std::string& help) {
  return app.add_option(name, field, help)
      ->type_name(value_name)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* add_integer(CLI::App& app, const std::string& name, const std::string& value_name,
                         std::optional<int64_t>& field, int64_t min, int64_t max,
                         const std::string& help) {
  CLI::Option* option = app.add_option_function<int64_t>(
      name, [&field](int64_t value) { field = value; }, help);
  return checked(option->type_name(value_name), [name, min, max](const std::string& text) {
    const int64_t n = parse_int(text, name);
    if (n < min || n > max)
      throw UsageError(name + " must be between " + std::to_string(min) + " and " +
                       std::to_string(max) + ", got " + text);
  });
}

CLI::Option* add_number(CLI::App& app, const std::string& name, const std::string& value_name,
                        std::optional<double>& field, NumberRule rule, const std::string& help) {
  CLI::Option* option = app.add_option_function<double>(
      name, [&field](double value) { field = value; }, help);
  return checked(option->type_name(value_name), [name, rule](const std::string& text) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v))
      throw UsageError(name + " must be a number, got '" + text + "'");
    if (rule == NumberRule::NonNegative && v < 0)
      throw UsageError(name + " must be a number >= 0, got '" + text + "'");
    if (rule == NumberRule::Positive && !(v > 0))
      throw UsageError(name + " must be a positive number, got '" + text + "'");
  });
}

void parse_command_line(CLI::App& app, int argc, char** argv, int first) {
  try {
    app.parse(argc - first + 1, argv + first - 1);  // CLI11 skips the program's name
  } catch (const CLI::ExtrasError&) {
    throw unexpected_argument(app);
  } catch (const CLI::ArgumentMismatch& e) {
    throw value_count_error(e);
  } catch (const CLI::RequiredError& e) {
    // CLI11 checks requirements before it reports unknown words: a mistyped option is the
    // likelier mistake ("--optimiser sgd" leaves --optimizer missing), so it comes first.
    if (!app.remaining().empty()) throw unexpected_argument(app);
    if (std::string(e.what()).rfind("model", 0) == 0)
      throw UsageError("expected one model file (see --help)");
    throw UsageError(e.what());
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
}

std::string command_help(const CLI::App& app) {
  return app.help();
}

}  // namespace dprun::cli
