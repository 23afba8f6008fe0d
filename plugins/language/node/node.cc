// airlock.language.node: Node.js from the host's /usr/bin/node.
#include "common/language_support.h"
#include "prestart_driver.h"  // kPrestartDriver: prestart_driver.js, generated at build time
#include "session_driver.h"   // kSessionDriver: session_driver.js, generated at build time

namespace {

class Node final : public airlock::sdk::LanguagePlugin {
 public:
  static constexpr const char* kName = "airlock.language.node";
  static constexpr const char* kAliases[] = {"js", "javascript", "nodejs", nullptr};
  static constexpr const char* kExtensions[] = {".js", ".mjs", ".cjs", nullptr};
  static constexpr const char* kImagePaths[] = {nullptr};  // everything it needs is under /usr
  static constexpr size_t kMaxInlineBytes = 100 * 1024;

  Node(const airlock_host_v1* host, std::string_view config_json)
      : LanguagePlugin(host, config_json),
        interpreter_(airlock::languages::parseConfig(config_json, kName).interpreter) {
    if (interpreter_.empty()) interpreter_ = "/usr/bin/node";
  }

  Command buildCommand(const airlock_code_request_v1& request) override {
    Command c;
    c.argv.push_back(interpreter_);
    if (airlock::languages::isInline(request)) {
      c.argv.push_back("-e");
      c.argv.push_back(airlock::languages::inlineCode(request));
      // "--" so arguments such as "--version" reach process.argv instead of node itself.
      c.argv.push_back("--");
    } else {
      c.argv.push_back(airlock::languages::programPath(request));
    }
    for (auto& a : airlock::languages::requestArgs(request)) c.argv.push_back(std::move(a));
    // No variables of its own: the supervisor's clean environment is all node gets, so nothing
    // like NODE_OPTIONS or NODE_EXTRA_CA_CERTS leaks in from the host.
    return c;
  }

  // --expose-internals: the driver rewrites top-level await with the REPL's own transform
  // (internal/repl/await), so declarations persist and the last value comes back as in the REPL.
  Command buildSession() override {
    return {{interpreter_, "--expose-internals", "-e", kSessionDriver}, {}};
  }

  // --expose-internals: the driver runs the program through node's own `-e` and main-module entry
  // points (internal/process/execution, Module.runMain) and restores node's frames in stack
  // traces. The modules follow "--", where the driver reads them from process.argv. No
  // environment, as for one-shot runs.
  Command buildPrestart(const std::vector<std::string>& modules) override {
    Command c{{interpreter_, "--expose-internals", "-e", kPrestartDriver, "--"}, {}};
    for (const auto& m : modules) {
      airlock::languages::checkPrestartModule(m);
      c.argv.push_back(m);
    }
    return c;
  }

 private:
  std::string interpreter_;
};

static_assert(sizeof(kSessionDriver) <= airlock::languages::kMaxArgStrlen,
              "session_driver.js no longer fits in one argv string");
static_assert(sizeof(kPrestartDriver) <= airlock::languages::kMaxArgStrlen,
              "prestart_driver.js no longer fits in one argv string");

}  // namespace

AIRLOCK_LANGUAGE_PLUGIN(Node, Node::kName, "1.0.0")
