// JSON shapes of the answers in docs/api.md, and the `"stream": false` aggregation of event
// streams into one document.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "supervisor/sandbox/service.h"

namespace airlock::api {

using sandbox::Json;

// Serializes without ever throwing: strings that are not valid UTF-8 (a path parameter echoed in
// an error message, say) get U+FFFD instead of aborting the response.
std::string dumpJson(const Json& j);
// One NDJSON line (with its newline) for a stream event; fast for stdout/stderr text.
std::string eventLine(const Json& event);
// The media type of event streams as frames (docs/api.md, "Event streams as frames").
inline constexpr std::string_view kFramesType = "application/vnd.airlock.frames";
// One frame of such a stream: a kind byte, the payload's length (4 bytes, big-endian), the
// payload. Output events are their bytes as they came ('o' stdout, 'e' stderr), with no JSON
// escaping or base64 on either side; every other event is its JSON ('j').
std::string eventFrame(const Json& event);

// {"error": {"code": "not_found", "message": "..."}}
std::string errorBody(const sandbox::ServiceError& error);

Json encodeSandbox(const sandbox::SandboxInfo& s);
Json encodeCommand(const sandbox::CommandInfo& c);
Json encodeContext(const sandbox::ContextInfo& c);
Json encodeWorkspace(const sandbox::WorkspaceInfo& w);
// A list entry has "name"; a stat entry (`with_path`) has "path" (FileEntry::name holds the
// absolute path there) and the base name.
Json encodeFileEntry(const sandbox::FileEntry& e, bool with_path);

// Puts `bytes` under `key` when valid UTF-8, else base64 under `key`_base64.
void putText(Json& doc, const std::string& key, std::string_view bytes);

// Folds command events (start, stdout, stderr, exit) into the `"stream": false` document.
class CommandAggregate {
 public:
  void add(const Json& event);
  bool complete() const { return saw_exit_; }
  Json document() const;

 private:
  Json command_id_;
  std::string stdout_, stderr_;
  Json exit_;
  bool saw_exit_ = false;
};

// Folds code events (stdout, stderr, result, display, error, end) into one document.
class CodeAggregate {
 public:
  void add(const Json& event);
  bool complete() const { return saw_end_; }
  Json document() const;

 private:
  std::string stdout_, stderr_;
  Json results_ = Json::array();
  Json error_;
  Json end_;
  bool saw_end_ = false;
};

// Keeps the last event of a one-shot run ("result") as the `"stream": false` document; its
// output is in the record already.
class RunAggregate {
 public:
  void add(const Json& event);
  bool complete() const { return saw_result_; }
  Json document() const { return result_; }

 private:
  Json result_;
  bool saw_result_ = false;
};

}  // namespace airlock::api
