// airlock code: code run in a stateful context of a sandbox of a running `airlock serve`, with
// its output, last value, errors and display images.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "airlock/whole_file.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"
#include "supervisor/encoding/base64.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kCodeUsage = R"(Usage: airlock code SB [options] (-c CODE | FILE | -)

Runs code in a stateful context of sandbox SB: variables, imports and files persist between
calls to the same context. Prints stdout and stderr live, then the value of the last
expression. Every display image (e.g. each open matplotlib figure) is written to
airlock-display-<n>.png in the current directory (or --save-dir).

Exit code: 0 when the code ran; 1 when it raised an error or its context was lost; 124 when it
hit its timeout; 125 when airlock failed (bad flags, supervisor not reachable, error answer).

Options)";

Result<std::string> readCodeFrom(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    if (std::cin.bad()) return fail("cannot read the code from standard input");
    return ss.str();
  }
  return readWholeFile(path);
}

class DisplaySaver {
 public:
  explicit DisplaySaver(std::string dir) : dir_(std::move(dir)) {}
  bool failed() const { return failed_; }

  // Writes data["image/png"] to <dir>/airlock-display-<n>.png. False when there is no PNG.
  bool save(const Json& data) {
    if (!data.is_object() || !data.contains("image/png") || !data["image/png"].is_string())
      return false;
    ++count_;
    std::string path =
        (std::filesystem::path(dir_) / ("airlock-display-" + std::to_string(count_) + ".png"))
            .string();
    std::string b64 = data["image/png"].get<std::string>();
    std::erase_if(b64, [](char ch) { return ch == '\n' || ch == '\r'; });
    auto png = encoding::base64Decode(b64);
    if (!png) {
      report("code: display " + std::to_string(count_) + ": image/png is not valid base64");
      failed_ = true;
      return true;
    }
    if (auto written = writeWholeFile(path, *png); !written) {
      report("code: cannot write display " + std::to_string(count_) + ": " +
             written.error().message());
      failed_ = true;
      return true;
    }
    report("display " + std::to_string(count_) + " saved to " + path);
    return true;
  }

 private:
  std::string dir_;
  int count_ = 0;
  bool failed_ = false;
};

void printCodeError(const Json& ev) {
  std::string name = str(ev, "name"), value = str(ev, "value");
  std::string summary = value.empty() ? name : name + ": " + value;
  std::string text;
  std::string last;
  if (ev.contains("traceback") && ev["traceback"].is_array())
    for (const auto& line : ev["traceback"]) {
      if (!line.is_string()) continue;
      last = line.get<std::string>();
      text += last;
      if (!last.ends_with('\n')) text += '\n';
    }
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  // Python's own traceback already ends with "Name: value".
  if (last != summary) text += summary + "\n";
  std::cerr << text << std::flush;
}
}  // namespace

int codeCommand(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::string language, context, code, save_dir = ".";
  double timeout = 0;
  po::options_description opts(kCodeUsage);
  opts.add_options()("code,c", po::value(&code), "the code text")(
      "language,lang,l", po::value(&language),
      "python or node (default: the sandbox's language; FILE's extension)")(
      "context", po::value(&context), "context id (default: the language's default context)")(
      "timeout,t", po::value(&timeout), "wall-clock limit in seconds (capped by the profile)")(
      "save-dir", po::value(&save_dir), "where display images are written (default: .)");
  po::variables_map vm;
  if (auto exit = parseArgs("code", args, opts, vm, positional)) return *exit;
  if (positional.empty())
    return report("code: expected SB (see `airlock code --help`)"), kExitFailed;
  std::string sb = positional[0];
  if (vm.count("code") == (positional.size() == 2) || positional.size() > 2)
    return report("code: give exactly one of -c CODE, FILE or - (stdin)"), kExitFailed;
  if (!vm.count("code")) {
    auto text = readCodeFrom(positional[1]);
    if (!text) return report("code: " + text.error().message()), kExitFailed;
    code = std::move(*text);
    if (language.empty()) {
      auto ext = std::filesystem::path(positional[1]).extension().string();
      if (ext == ".py") language = "python";
      if (ext == ".js" || ext == ".mjs" || ext == ".cjs") language = "node";
    }
  }
  Json body = {{"code", code}, {"stream", true}};
  if (!language.empty()) body["language"] = language;
  if (!context.empty()) body["context_id"] = context;
  if (vm.count("timeout")) body["timeout_s"] = timeout;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;

  DisplaySaver displays(save_dir);
  std::optional<Json> end;
  auto r = c->stream("POST", sandboxTarget(sb) + "/code", body, [&](const Json& ev) {
    std::string type = str(ev, "type");
    if (type == "stdout" || type == "stderr") {
      (void)writeAll(type == "stdout" ? STDOUT_FILENO : STDERR_FILENO, eventBytes(ev));
    } else if (type == "result" || type == "display") {
      const Json& data = ev.contains("data") ? ev["data"] : Json();
      bool saved = displays.save(data);
      // A result's value is always shown; a display's text only stands in for a missing image.
      if ((type == "result" || !saved) && data.is_object() && data.contains("text/plain")) {
        std::string text = str(data, "text/plain");
        if (!text.ends_with('\n')) text += '\n';
        (void)writeAll(STDOUT_FILENO, text);
      }
    } else if (type == "error") {
      printCodeError(ev);
    } else if (type == "end") {
      end = ev;
    }
  });
  if (!r) return report(r.error().message()), kExitFailed;
  if (!end) {
    report("code: the supervisor ended the event stream before the run ended");
    return kExitFailed;
  }
  std::string status = str(*end, "status");
  if (flag(*end, "context_restarted"))
    report("code: context '" + str(*end, "context_id") +
           "' was restarted: its variables and imports are gone");
  if (status == "timeout") {
    report("code: the run hit its timeout and was interrupted");
    return kExitTimeout;
  }
  if (status == "context_lost") {
    report("code: context '" + str(*end, "context_id") +
           "' was lost (its interpreter died); the next run starts a fresh one");
    return 1;
  }
  if (status == "error") return 1;
  if (status != "ok") {
    report("code: unknown end status '" + status + "'");
    return kExitFailed;
  }
  return displays.failed() ? kExitFailed : 0;
}

}  // namespace airlock::cli
