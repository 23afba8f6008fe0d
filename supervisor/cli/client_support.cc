// The helpers of client_support.h: what the clients of a running `airlock serve` share.
#include "supervisor/cli/client_support.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>

#include "supervisor/encoding/base64.h"

namespace po = boost::program_options;

namespace airlock::cli {

using client::percentEncode;

void report(const std::string& message) { std::cerr << "airlock: " << message << "\n"; }

std::string str(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const Json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

int64_t num(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].is_number_float() ? static_cast<int64_t>(j[key].get<double>())
                                  : j[key].get<int64_t>();
}

bool flag(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string humanDuration(int64_t ms) {
  // Rounded to the nearest second: a lifetime of 7200 s read back a few milliseconds later is
  // still "2h", not "1h59m59s".
  int64_t s = (std::max<int64_t>(ms, 0) + 500) / 1000;
  if (s == 0) return "0s";
  std::string out;
  for (auto [unit, secs] : {std::pair{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}) {
    if (s >= secs) out += std::to_string(s / secs) + unit;
    s %= secs;
  }
  return out;
}

std::string sandboxTarget(const std::string& sb) { return "/v1/sandboxes/" + percentEncode(sb); }

Result<std::map<std::string, std::string>> parseKeyValues(const std::vector<std::string>& items,
                                                          const std::string& flag_name) {
  std::map<std::string, std::string> out;
  for (const auto& kv : items) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail(flag_name + " '" + kv + "': expected K=V");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

Result<> writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", fd == STDOUT_FILENO ? "stdout" : "stderr");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// The bytes of a stdout/stderr event: "data" when UTF-8, else "data_base64".
std::string eventBytes(const Json& ev) {
  if (ev.contains("data") && ev["data"].is_string()) return ev["data"].get<std::string>();
  if (ev.contains("data_base64") && ev["data_base64"].is_string())
    return encoding::base64Decode(ev["data_base64"].get<std::string>()).value_or("");
  return "";
}

std::optional<int> parseArgs(const std::string& name, const std::vector<std::string>& args,
                             po::options_description& opts, po::variables_map& vm,
                             std::vector<std::string>& positional) {
  opts.add_options()("help,h", "show this help");
  po::options_description hidden;
  hidden.add_options()("positional", po::value(&positional)->composing(), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("positional", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    report(name + ": " + e.what() + " (see `airlock " + name + " --help`)");
    return kExitFailed;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  return std::nullopt;
}

Result<Client> connectClient() { return Client::fromEnvironment(); }

void printTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string untilText(int64_t at_ms, int64_t now) {
  if (at_ms <= 0) return "-";
  if (at_ms <= now) return "now";
  return "in " + humanDuration(at_ms - now);
}

}  // namespace airlock::cli
