// spdlog does the timestamp, the locking and the writing; this file builds the event and its
// fields into the message, quoted for text or escaped for JSON.
#include "supervisor/log/log.h"

#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace airlock::log {

namespace {

std::atomic<int> g_level{static_cast<int>(Level::kWarn)};
std::atomic<int> g_format{static_cast<int>(Format::kText)};
std::atomic<bool> g_configured{false};

// The logger, replaced only by configure() and redirectForTesting(); writers take a copy.
std::mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger;
std::ostream* g_test_out = nullptr;

spdlog::level::level_enum spdlogLevel(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// %* in the patterns: our level names ("warn", not spdlog's "warning").
class LevelFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view name = "error";
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        name = "debug";
        break;
      case spdlog::level::info:
        name = "info";
        break;
      case spdlog::level::warn:
        name = "warn";
        break;
      default:
        break;
    }
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>();
  }
};

// RFC 3339 in UTC with milliseconds; the JSON pattern wraps the body's members in the object.
std::unique_ptr<spdlog::formatter> makeFormatter(Format format) {
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc, "\n");
  f->add_flag<LevelFlag>('*');
  f->set_pattern(format == Format::kJson ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%*",%v})"
                                         : "%Y-%m-%dT%H:%M:%S.%eZ %* %v");
  return f;
}

std::shared_ptr<spdlog::logger> makeLogger() {
  spdlog::sink_ptr sink;
  if (g_test_out != nullptr)
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*g_test_out, true);
  else
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();  // flushes every line
  auto logger = std::make_shared<spdlog::logger>("airlock", std::move(sink));
  logger->set_formatter(makeFormatter(static_cast<Format>(g_format.load())));
  logger->set_level(spdlog::level::trace);  // g_level filters, before any formatting
  return logger;
}

std::shared_ptr<spdlog::logger> logger() {
  std::lock_guard lock(g_mu);
  if (!g_logger) g_logger = makeLogger();
  return g_logger;
}

std::string jsonString(std::string_view s) {
  // `replace`: a value that is not UTF-8 (a path, a peer's text) still makes valid JSON.
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A text value is bare unless a reader could not tell where it ends: empty, or holding a space,
// '"', '=', '\' or a control character. Quoted ones use JSON's escapes (as logfmt does).
bool needsQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (unsigned char c : s)
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
  return false;
}

// Milliseconds and seconds read best with at most three decimals: 41.7, 0.125, 2.
std::string formatDouble(double v) {
  std::string s = fmt::format("{:.3f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

void appendValue(std::string& out, Format format, const Field::Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          if (format == Format::kJson || needsQuotes(v))
            out += jsonString(v);
          else
            out += v;
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(v))
            out += formatDouble(v);
          else
            out += format == Format::kJson ? "null" : (std::isnan(v) ? "nan" : "inf");
        } else {
          out += std::to_string(v);
        }
      },
      value);
}

}  // namespace

std::optional<Level> parseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

std::optional<Format> parseFormat(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

std::string_view levelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "error";
}

void configure(Level level, Format format) {
  g_level = static_cast<int>(level);
  g_format = static_cast<int>(format);
  g_configured = true;
  std::lock_guard lock(g_mu);
  g_logger = makeLogger();
}

bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

bool configured() { return g_configured.load(); }

std::string formatBody(Format format, std::string_view event, Fields fields) {
  std::string out;
  out.reserve(64 + 24 * fields.size());
  if (format == Format::kJson) {
    out += "\"event\":";
    out += jsonString(event);
    for (const Field& f : fields) {
      out += ',';
      out += jsonString(f.key);
      out += ':';
      appendValue(out, format, f.value);
    }
    return out;
  }
  out += event;
  for (const Field& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    appendValue(out, format, f.value);
  }
  return out;
}

void write(Level level, std::string_view event, Fields fields) {
  if (!enabled(level)) return;
  std::string body = formatBody(static_cast<Format>(g_format.load()), event, fields);
  logger()->log(spdlogLevel(level), std::string_view(body));
}

void redirectForTesting(std::ostream* out) {
  std::lock_guard lock(g_mu);
  g_test_out = out;
  g_logger = makeLogger();
}

}  // namespace airlock::log
