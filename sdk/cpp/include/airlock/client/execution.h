// What a code run returns (docs/api.md, Code): output, rich results (the last expression's value
// and every matplotlib figure as a PNG), and the error the code raised.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/client/audit.h"
#include "airlock/client/error.h"

namespace airlock::sdk {

// One rich result: MIME type → data ("text/plain", "image/png" as base64, ...).
struct DisplayData {
  std::map<std::string, std::string> data;
  bool is_main_result = false;  // the value of the last expression, not a figure or display()

  bool has(const std::string& mime) const { return data.contains(mime); }
  // "" when absent.
  std::string text() const { return get("text/plain"); }
  std::string png() const { return get("image/png"); }  // base64, as the API sends it
  std::string get(const std::string& mime) const {
    auto it = data.find(mime);
    return it == data.end() ? std::string() : it->second;
  }
};

// An exception the code raised: ZeroDivisionError, "division by zero", the traceback lines.
struct ExecutionError {
  std::string name;
  std::string value;
  std::vector<std::string> traceback;
};

enum class RunStatus { kOk, kError, kTimeout, kContextLost };

// A run taken over from a supervisor that died (Sandbox::recoveredRun): its "supervisor_restart"
// event. held_bytes: the output the agent kept for the next supervisor; dropped_bytes: what did
// not fit and is lost.
struct RunRestart {
  std::string run_id;
  uint64_t held_bytes = 0;
  uint64_t dropped_bytes = 0;
};

struct Execution {
  RunStatus status = RunStatus::kOk;
  std::string stdout_text;
  std::string stderr_text;
  std::vector<DisplayData> results;
  std::optional<ExecutionError> error;
  double duration_ms = 0;
  std::string context_id;
  bool context_restarted = false;     // the interpreter was restarted (state is gone)
  std::optional<Review> review;       // the review chain's verdict, when the profile has one
  std::optional<AuditSummary> audit;  // what the run did; absent when the profile audits nothing
  std::optional<RunRestart> restart;  // set by recoveredRun: the run outlived its supervisor

  // The last expression's value, when there was one.
  const DisplayData* mainResult() const {
    for (const auto& r : results)
      if (r.is_main_result) return &r;
    return nullptr;
  }
  // Its text/plain ("" when there is none).
  std::string text() const { return mainResult() != nullptr ? mainResult()->text() : ""; }
};

struct RunCodeOptions {
  std::string language;    // "" = the sandbox's default language
  std::string context_id;  // "" = the language's default context
  std::optional<double> timeout_s;
  // Live output, called on the calling thread as each event arrives.
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  std::function<void(const DisplayData&)> on_result;
  std::function<void(const ExecutionError&)> on_error;
};

}  // namespace airlock::sdk
