// The supervisor's operational log: one line per event, with a timestamp, a level, an event name
// and key=value fields, written to stderr (where journald collects it under systemd).
//
//   log::info("sandbox.create", {{"sandbox", id}, {"tenant", tenant}, {"ms", 41.7}});
//
// text:  2026-11-28T07:01:02.123Z info sandbox.create sandbox=sb-1 tenant=t1 ms=41.7
// json:  {"ts":"2026-11-28T07:01:02.123Z","level":"info","event":"sandbox.create",...}
//
// Fields hold views of their values and are formatted only when the level is on, so a call
// below the level costs an atomic load. Thread-safe: lines from concurrent threads never mix.
// spdlog stays out of this header (log.cc is its only includer).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace airlock::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "debug", "info", "warn", "error"; nullopt for anything else.
std::optional<Level> parseLevel(std::string_view name);
// "text", "json"; nullopt for anything else.
std::optional<Format> parseFormat(std::string_view name);
std::string_view levelName(Level level);

// One key=value of a line. Strings are viewed, not copied: a field lives for the statement that
// logs it, so temporaries (std::to_string(n), s.id) are fine.
struct Field {
  using Value = std::variant<std::string_view, int64_t, uint64_t, double, bool>;
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  Field(std::string_view k, const char* v) : key(k), value(std::string_view(v ? v : "")) {}
  Field(std::string_view k, bool v) : key(k), value(v) {}
  Field(std::string_view k, double v) : key(k), value(v) {}
  template <std::signed_integral T>
  Field(std::string_view k, T v) : key(k), value(static_cast<int64_t>(v)) {}
  template <std::unsigned_integral T>
  requires(!std::same_as<T, bool>) Field(std::string_view k, T v)
      : key(k), value(static_cast<uint64_t>(v)) {}

  std::string_view key;
  Value value;
};
using Fields = std::initializer_list<Field>;

// Sets the level below which lines are dropped and the line format. Until it is called the
// level is warn and the format text: `airlock run` and the other CLI commands stay quiet, and
// `airlock serve` configures what the flag or the policy asks for.
void configure(Level level, Format format);
bool enabled(Level level);
// True once configure() has run: the process is a daemon whose stderr is a log, rather than a
// CLI command whose stderr a user reads.
bool configured();

// Writes one line when `level` is on.
void write(Level level, std::string_view event, Fields fields);

inline void debug(std::string_view event, Fields fields = {}) {
  if (enabled(Level::kDebug)) write(Level::kDebug, event, fields);
}
inline void info(std::string_view event, Fields fields = {}) {
  if (enabled(Level::kInfo)) write(Level::kInfo, event, fields);
}
inline void warn(std::string_view event, Fields fields = {}) {
  if (enabled(Level::kWarn)) write(Level::kWarn, event, fields);
}
inline void error(std::string_view event, Fields fields = {}) {
  if (enabled(Level::kError)) write(Level::kError, event, fields);
}

// What follows the timestamp and level on a line: `event k=v ...` (text) or
// `"event":"...","k":v,...` (json, the members without braces). Exposed for the unit tests.
std::string formatBody(Format format, std::string_view event, Fields fields);

// Sends lines to `out` instead of stderr (nullptr: back to stderr). For tests.
void redirectForTesting(std::ostream* out);

}  // namespace airlock::log
