// example.language.awk: run awk programs in airlock sandboxes.
//
//   airlock run --lang awk -e 'BEGIN { print 6 * 7 }'
//   airlock run prog.awk data.csv
#include <airlock/plugin.hpp>

#include <cerrno>
#include <string>

namespace {

class Awk final : public airlock::sdk::LanguagePlugin {
 public:
  using LanguagePlugin::LanguagePlugin;

  static constexpr const char* kAliases[] = {"gawk", "mawk", nullptr};
  static constexpr const char* kExtensions[] = {".awk", nullptr};
  // /usr/bin/awk is a symlink through /etc/alternatives on Debian.
  static constexpr const char* kImagePaths[] = {"/etc/alternatives", nullptr};
  static constexpr size_t kMaxInlineBytes = 64 * 1024;

  Command buildCommand(const airlock_code_request_v1& request) override {
    Command command{{"/usr/bin/awk"}, {}};
    if (request.source == AIRLOCK_CODE_INLINE) {
      std::string program(request.code.ptr, request.code.len);
      if (program.find('\0') != std::string::npos)
        throw airlock::sdk::PluginError(EINVAL, "awk program contains a NUL byte");
      command.argv.insert(command.argv.end(), {"--", program});
    } else {
      command.argv.insert(command.argv.end(), {"-f", request.path, "--"});
    }
    for (const char* const* arg = request.args; arg != nullptr && *arg != nullptr; ++arg)
      command.argv.emplace_back(*arg);
    return command;
  }
};

}  // namespace

AIRLOCK_LANGUAGE_PLUGIN(Awk, "example.language.awk", "0.1.0")
