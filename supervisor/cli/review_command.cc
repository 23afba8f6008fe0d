// airlock review: the profile's review chain on a file, without running it (a dry run). Prints
// each reviewer's verdict and time; exits 0 when the chain allows, 1 on deny or hold.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "airlock/policy/policy.h"
#include "airlock/whole_file.h"
#include "supervisor/cli/cli.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/chain.h"
#include "supervisor/sandbox/review_runner.h"
#include "supervisor/sandbox/run_result.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kReviewUsage = R"(Usage: airlock review [options] FILE | -
       airlock review ls|approve|reject ...   (the approval queue of `airlock serve`)

Runs the review chain of a profile on FILE (or standard input) and prints what each reviewer
said, without running the code. python_ast checks start a throwaway sandbox (needs root).

Exit code: 0 when the chain allows, 1 when it denies or holds, 125 when airlock failed.

Options)";

std::string cell(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s + std::string(width - s.size() + 1, ' ');
}

}  // namespace

int reviewCommand(const std::vector<std::string>& args) {
  // `airlock review ls|approve|reject` talk to a running supervisor; a file named like a verb
  // is reviewed as ./ls.
  if (!args.empty() &&
      (args[0] == "ls" || args[0] == "list" || args[0] == "approve" || args[0] == "reject"))
    return reviewQueueCommand(args);
  std::string policy_file, profile_name, language, file;
  bool as_command = false, json = false;
  po::options_description opts(kReviewUsage);
  opts.add_options()("help,h", "show this help")(
      "policy", po::value(&policy_file), "policy file (default: the built-in default policy)")(
      "profile,p", po::value(&profile_name), "profile whose chain runs (default: default_profile)")(
      "language,lang,l", po::value(&language),
      "python, node or shell (default: from FILE's extension)")(
      "command", po::bool_switch(&as_command), "review the text as a command (`sh -c` string)")(
      "json", po::bool_switch(&json), "print the verdict and the steps as one JSON document");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&file), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    printError(std::string("review: ") + e.what() + " (see `airlock review --help`)");
    return sandbox::kExitAirlockError;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (file.empty()) {
    printError("review: which code? `airlock review --profile P FILE` (or - for stdin)");
    return sandbox::kExitAirlockError;
  }

  auto pol = policy_file.empty() ? Result<policy::Policy>(policy::builtinDefault())
                                 : policy::loadFile(policy_file);
  if (!pol) return printError(pol.error().message()), sandbox::kExitAirlockError;
  auto profile = pol->profile(profile_name);
  if (!profile)
    return printError("review: " + profile.error().message()), sandbox::kExitAirlockError;

  std::string text;
  if (file == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    auto read = readWholeFile(file);
    if (!read)
      return printError("review: cannot read '" + file + "': " + read.error().message()),
             sandbox::kExitAirlockError;
    text = std::move(*read);
  }

  auto registry = plugin::Registry::loadDirectory(plugin::defaultPluginDir());
  if (as_command) {
    language = "shell";
  } else if (language.empty() && file == "-") {
    printError("review: code on stdin needs --language");
    return sandbox::kExitAirlockError;
  } else {
    auto lang = language.empty() ? registry.languageForFile(file) : registry.language(language);
    if (!lang) return printError("review: " + lang.error().message()), sandbox::kExitAirlockError;
    language = (*lang)->name();
  }

  review::ChainOptions options;
  options.policy_hash = pol->hash;
  options.sandbox_runner = std::make_shared<sandbox::StandaloneReviewRunner>(
      *pol, (*profile)->name, plugin::defaultPluginDir(), plugin::defaultAgentPath());
  options.plugins = &registry;
  auto chain = review::Chain::build(**profile, std::move(options));
  if (!chain) return printError("review: " + chain.error().message()), sandbox::kExitAirlockError;

  review::Subject subject = as_command ? review::Subject::commandLine(std::move(text))
                                       : review::Subject::code(language, std::move(text));
  review::ReviewOutcome outcome = (*chain)->review(std::move(subject));
  const review::Verdict& v = outcome.verdict;

  if (json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : outcome.steps) {
      steps.push_back(
          {{"reviewer", s.reviewer},
           {"verdict", review::decisionName(s.decision)},
           {"rule", s.rule},
           {"reason", s.reason},
           {"error", s.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.error)},
           {"duration_ms", s.duration_ms}});
    }
    std::cout << nlohmann::json{{"profile", (*profile)->name},
                                {"chain", (*chain)->names()},
                                {"review", v.toJson()},
                                {"steps", steps}}
                     .dump()
              << "\n";
  } else {
    if ((*chain)->empty()) {
      std::cout << "profile '" << (*profile)->name
                << "' has no review chain: everything is allowed\n";
    }
    for (const auto& s : outcome.steps) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%9.3f ms", s.duration_ms);
      std::cout << cell(s.reviewer, 14) << cell(std::string(review::decisionName(s.decision)), 5)
                << cell(s.rule.empty() ? "-" : s.rule, 18) << ms
                << (s.reason.empty() ? "" : "  " + s.reason) << "\n";
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f ms", v.duration_ms);
    std::cout << "verdict: " << v.message() << " (" << ms << (v.cached ? ", cached" : "") << ")\n";
  }
  return v.allowed() ? 0 : 1;
}

}  // namespace airlock::cli
