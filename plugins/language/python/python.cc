// airlock.language.python: CPython 3 from the host's /usr/bin/python3.
#include "common/language_support.h"
#include "prestart_driver.h"  // kPrestartDriver: prestart_driver.py, generated at build time
#include "session_driver.h"   // kSessionDriver: session_driver.py, generated at build time

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

  // The one-shot command's interpreter, flags (none: no -u, since the program's streams must
  // buffer as in `python3 -c`; env() sets the same PYTHONUNBUFFERED for both) and environment.
  // The modules follow the driver, which reads them from sys.argv and then resets it.
  Command buildPrestart(const std::vector<std::string>& modules) override {
    Command c{{interpreter_, "-c", kPrestartDriver}, env()};
    for (const auto& m : modules) {
      airlock::languages::checkPrestartModule(m);
      if (!isDottedName(m))
        throw airlock::sdk::PluginError(
            EINVAL, "prestart module '" + m + "' is not a dotted Python module name");
      c.argv.push_back(m);
    }
    return c;
  }

 private:
  static std::vector<std::string> env() {
    return {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "MPLBACKEND=Agg",
            "PYTHONIOENCODING=utf-8"};
  }
  // "pandas", "matplotlib.pyplot": identifiers (ASCII, or any non-ASCII UTF-8) joined by dots.
  static bool isDottedName(const std::string& name) {
    bool start = true;
    for (unsigned char ch : name) {
      if (ch == '.') {
        if (start) return false;
        start = true;
      } else if (((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || ch == '_' || ch >= 0x80 ||
                 (!start && ch >= '0' && ch <= '9')) {
        start = false;
      } else {
        return false;
      }
    }
    return !start;
  }
  std::string interpreter_;
};

static_assert(sizeof(kSessionDriver) <= airlock::languages::kMaxArgStrlen,
              "session_driver.py no longer fits in one argv string");
static_assert(sizeof(kPrestartDriver) <= airlock::languages::kMaxArgStrlen,
              "prestart_driver.py no longer fits in one argv string");

}  // namespace

AIRLOCK_LANGUAGE_PLUGIN(Python, Python::kName, "1.0.0")
