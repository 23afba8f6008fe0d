// airlock.language.shell: bash when the host has it, else POSIX sh.
#include <unistd.h>

#include "common/language_support.h"
#include "session_driver.h"  // kSessionDriver: session_driver.sh, generated at build time

namespace {

class Shell final : public airlock::sdk::LanguagePlugin {
 public:
  static constexpr const char* kName = "airlock.language.shell";
  static constexpr const char* kAliases[] = {"sh", "bash", nullptr};
  static constexpr const char* kExtensions[] = {".sh", nullptr};
  // awk, editor, pager and friends are symlinks through /etc/alternatives.
  static constexpr const char* kImagePaths[] = {"/etc/alternatives", nullptr};
  static constexpr size_t kMaxInlineBytes = 100 * 1024;

  Shell(const airlock_host_v1* host, std::string_view config_json)
      : LanguagePlugin(host, config_json),
        interpreter_(airlock::languages::parseConfig(config_json, kName).interpreter) {
    if (interpreter_.empty())
      interpreter_ = ::access("/usr/bin/bash", X_OK) == 0 ? "/usr/bin/bash" : "/bin/sh";
  }

  Command buildCommand(const airlock_code_request_v1& request) override {
    Command c;
    c.argv.push_back(interpreter_);
    if (airlock::languages::isInline(request)) {
      // "--" so a program starting with '-' is not read as options; "airlock" becomes $0 and
      // the arguments $1, $2, ...
      c.argv.insert(c.argv.end(), {"-c", "--", airlock::languages::inlineCode(request), "airlock"});
    } else {
      c.argv.push_back(airlock::languages::programPath(request));
    }
    for (auto& a : airlock::languages::requestArgs(request)) c.argv.push_back(std::move(a));
    return c;
  }

  // A stateful bash: cwd, variables and functions persist between runs. Needs bash (arrays,
  // [[ =~ ]], traps on DEBUG); a host with only POSIX sh has no shell contexts. No profile or rc
  // file: a context starts the same everywhere.
  Command buildSession() override {
    std::string bash = interpreter_.ends_with("/bash") ? interpreter_ : "/usr/bin/bash";
    if (::access(bash.c_str(), X_OK) != 0)
      throw airlock::sdk::PluginError(ENOTSUP,
                                      "shell contexts need bash, and " + bash + " is not there");
    return {{bash, "--noprofile", "--norc", "-c", kSessionDriver}, {}};
  }

  // Nothing to start ahead of a shell script: bash starts in about a millisecond.
  Command buildPrestart(const std::vector<std::string>& /*modules*/) override {
    throw airlock::sdk::PluginError(ENOTSUP, "no prestart driver for shell");
  }

 private:
  std::string interpreter_;
};

static_assert(sizeof(kSessionDriver) <= airlock::languages::kMaxArgStrlen,
              "session_driver.sh no longer fits in one argv string");

}  // namespace

AIRLOCK_LANGUAGE_PLUGIN(Shell, Shell::kName, "1.0.0")
