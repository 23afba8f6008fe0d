// What the clients of a running `airlock serve` share (sandbox, exec, code, files, review
// ls|approve|reject): flag parsing, the connection, reading answers, and printing them.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "supervisor/client/client.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

using client::Client;
using client::Json;

constexpr int kExitFailed = sandbox::kExitAirlockError;  // 125: the client or the supervisor failed
constexpr int kExitTimeout = sandbox::kExitTimeout;      // 124

// "airlock: <message>" on stderr, like printError (cli.cc), without needing the dispatcher.
void report(const std::string& message);

// An answer's field as text ("" when missing or null; non-strings as JSON), as a number (0 when
// missing), as a flag (false unless true).
std::string str(const Json& j, const char* key);
int64_t num(const Json& j, const char* key);
bool flag(const Json& j, const char* key);

int64_t nowMs();
// Every non-zero unit, to the nearest second: 42s, 1h30m, 2h, 1d0h5m is "1d5m".
std::string humanDuration(int64_t ms);
// "-" when unset, "now" when past, else "in 5m".
std::string untilText(int64_t at_ms, int64_t now);
// Columns padded to their widest cell, two spaces apart.
void printTable(const std::vector<std::vector<std::string>>& rows);

// /v1/sandboxes/SB: the API path of sandbox SB (an id or a name).
std::string sandboxTarget(const std::string& sb);

// K=V items of a repeatable flag; the error names `flag_name` and the bad item.
Result<std::map<std::string, std::string>> parseKeyValues(const std::vector<std::string>& items,
                                                          const std::string& flag_name);

// Writes all of `data` to stdout or stderr.
Result<> writeAll(int fd, std::string_view data);
// The bytes of a stdout/stderr event: "data" when UTF-8, else "data_base64".
std::string eventBytes(const Json& ev);

// Parses flags and positionals. A value means: stop and exit with it (help shown, bad flags).
std::optional<int> parseArgs(const std::string& name, const std::vector<std::string>& args,
                             boost::program_options::options_description& opts,
                             boost::program_options::variables_map& vm,
                             std::vector<std::string>& positional);

// The supervisor from AIRLOCK_URL and AIRLOCK_TOKEN.
Result<Client> connectClient();

// Prints `r`'s error and returns 125, or runs `ok` on its value.
template <typename T, typename F>
int orFail(Result<T> r, F&& ok) {
  if (!r) {
    report(r.error().message());
    return kExitFailed;
  }
  return ok(*r);
}

}  // namespace airlock::cli
