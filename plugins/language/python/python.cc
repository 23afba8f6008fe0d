// airlock.language.python: CPython 3 from the host's /usr/bin/python3.
#include "common/language_support.h"
#include "session_driver.h"  // kSessionDriver: session_driver.py, generated at build time

namespace {

class Python final : public airlock::sdk::LanguagePlugin {
 public:
  static constexpr const char* kName = "airlock.language.python";
  static constexpr const char* kAliases[] = {"py", "python3", nullptr};
  static constexpr const char* kExtensions[] = {".py", nullptr};
  // Only what lives outside /usr: Debian's sitecustomize and matplotlib's system config.
  // Missing ones are skipped, so other Python minors can be listed too.
  static constexpr const char* kImagePaths[] = {"/etc/python3",      "/etc/python3.11",
                                                "/etc/python3.12",   "/etc/python3.13",
                                                "/etc/matplotlibrc", nullptr};
  static constexpr size_t kMaxInlineBytes = 100 * 1024;

  Python(const airlock_host_v1* host, std::string_view config_json)
      : LanguagePlugin(host, config_json),
        // Not the python3 first on PATH: that may be a pyenv shim or a venv the host user owns.
        interpreter_(airlock::languages::parseConfig(config_json, kName).interpreter) {
    if (interpreter_.empty()) interpreter_ = "/usr/bin/python3";
  }

  Command buildCommand(const airlock_code_request_v1& request) override {
    Command c;
    c.argv.push_back(interpreter_);
    if (airlock::languages::isInline(request)) {
      c.argv.push_back("-c");
      c.argv.push_back(airlock::languages::inlineCode(request));
    } else {
      c.argv.push_back(airlock::languages::programPath(request));
    }
    for (auto& a : airlock::languages::requestArgs(request)) c.argv.push_back(std::move(a));
    c.env = env();
    return c;
  }

  // -u: the driver's own writes need no flushing. Not -I (nor -s, -E): a context is the user's
  // workspace, so ~/.local packages from `pip install --user`, PYTHONPATH and modules in the
  // working directory must import as they would in a notebook.
  Command buildSession() override { return {{interpreter_, "-u", "-c", kSessionDriver}, env()}; }

 private:
  static std::vector<std::string> env() {
    return {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "MPLBACKEND=Agg",
            "PYTHONIOENCODING=utf-8"};
  }
  std::string interpreter_;
};

static_assert(sizeof(kSessionDriver) <= airlock::languages::kMaxArgStrlen,
              "session_driver.py no longer fits in one argv string");

}  // namespace

AIRLOCK_LANGUAGE_PLUGIN(Python, Python::kName, "1.0.0")
