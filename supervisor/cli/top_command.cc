// airlock top: a live view of the sandboxes of a running `airlock serve` (docs/operations-view.md).
// Each frame is GET /v1/sandboxes plus GET /v1/sandboxes/{id}/metrics per sandbox; CPU % is the
// growth of cpu_seconds between two frames. A supervisor without the metrics route (404) shows
// "-" in the resource columns instead of failing.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kTopUsage =
    R"(Usage: airlock top [--interval S] [--sort cpu|mem|age] [--once] [--json]

A live view of the sandboxes of a running `airlock serve`: one row per sandbox with its id,
tenant, profile, backend, age, state, CPU %, memory, the execution running now (its kind and
for how long) and the executions the review chain refused; a header with totals. It refreshes
every --interval seconds on the terminal's alternate screen; q or Ctrl-C quits and restores the
terminal. --once prints one frame and exits; --json prints a frame's data as JSON instead.

CPU % is the growth of the sandbox's CPU time between two frames (one core = 100%); the first
frame, and --once, show the average since the sandbox started. CPU and memory come from
GET /v1/sandboxes/{id}/metrics: "-" when the supervisor does not offer it.

The supervisor is found from AIRLOCK_URL (default unix:///run/airlock/airlock.sock) and
AIRLOCK_TOKEN, like `airlock sandbox`. A tenant's token sees that tenant's sandboxes.

Exit code: 0 on success; 125 when a request failed or a flag was wrong.

Options)";

// One sample of a sandbox's resources; absent when the supervisor has no metrics route.
struct Usage {
  double cpu_seconds = 0;
  double uptime_s = 0;
  int64_t memory_bytes = 0;
  int64_t memory_limit_bytes = 0;
  int64_t sampled_at = 0;  // Unix ms, the client's clock (the interval between two of ours)
};

struct Row {
  Json sandbox;                // as GET /v1/sandboxes lists it
  std::optional<Usage> usage;  // GET /v1/sandboxes/{id}/metrics
  std::optional<double> cpu_pct;
};

struct Frame {
  int64_t at = 0;  // Unix ms
  std::vector<Row> rows;
};

// GET /v1/sandboxes/{id}/metrics: nullopt on 404 (an older supervisor, or a sandbox that ended
// since the list), an error otherwise.
Result<std::optional<Usage>> sampleUsage(const Client& c, const std::string& id) {
  auto r = c.http().call("GET", sandboxTarget(id) + "/metrics");
  if (!r) {
    if (r.error().httpStatus() == 404) return std::optional<Usage>();
    return fail("GET " + sandboxTarget(id) + "/metrics: " + r.error().message());
  }
  Usage u;
  auto number = [&](const char* key) {
    auto it = r->find(key);
    return it != r->end() && it->is_number() ? it->get<double>() : 0.0;
  };
  u.cpu_seconds = number("cpu_seconds");
  u.uptime_s = number("uptime_s");
  u.memory_bytes = static_cast<int64_t>(number("memory_bytes"));
  u.memory_limit_bytes = static_cast<int64_t>(number("memory_limit_bytes"));
  u.sampled_at = nowMs();
  return std::optional<Usage>(u);
}

// One frame; `previous` gives each sandbox's last CPU time for CPU %.
Result<Frame> sampleFrame(const Client& c, const Frame* previous) {
  auto list = c.call("GET", "/v1/sandboxes");
  if (!list) return fail(list.error().message());
  Frame f;
  f.at = nowMs();
  if (!list->contains("sandboxes") || !(*list)["sandboxes"].is_array())
    return fail("GET /v1/sandboxes: the answer has no 'sandboxes' array");
  for (const auto& sb : (*list)["sandboxes"]) {
    Row row{sb, std::nullopt, std::nullopt};
    auto usage = sampleUsage(c, str(sb, "id"));
    if (!usage) return fail(usage.error().message());
    row.usage = *usage;
    if (row.usage) {
      const Usage* before = nullptr;
      if (previous != nullptr)
        for (const auto& p : previous->rows)
          if (str(p.sandbox, "id") == str(sb, "id") && p.usage) before = &*p.usage;
      if (before != nullptr && row.usage->sampled_at > before->sampled_at)
        row.cpu_pct = 100.0 * (row.usage->cpu_seconds - before->cpu_seconds) /
                      ((row.usage->sampled_at - before->sampled_at) / 1000.0);
      else if (row.usage->uptime_s > 0)
        row.cpu_pct = 100.0 * row.usage->cpu_seconds / row.usage->uptime_s;
    }
    f.rows.push_back(std::move(row));
  }
  return f;
}

void sortRows(std::vector<Row>& rows, const std::string& by) {
  auto key = [&](const Row& r) -> double {
    if (by == "cpu") return r.cpu_pct.value_or(-1);
    if (by == "mem") return r.usage ? static_cast<double>(r.usage->memory_bytes) : -1;
    return -static_cast<double>(num(r.sandbox, "created_at"));  // age: oldest first
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const Row& a, const Row& b) { return key(a) > key(b); });
}

std::string bytesText(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int i = 0;
  while (v >= 1024 && i < 4) v /= 1024, ++i;
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f%s" : "%.1f%s", v, units[i]);
  return buf;
}

int64_t reviewDenials(const Json& sb) {
  auto it = sb.find("recent_denials");
  return it != sb.end() && it->is_object() ? num(*it, "review") : 0;
}

// The running execution as JSON with its running time, or null.
Json executionOf(const Json& sb, int64_t now) {
  auto it = sb.find("current_execution");
  if (it == sb.end() || !it->is_object()) return nullptr;
  return Json{{"kind", str(*it, "kind")},
              {"id", it->value("id", Json())},
              {"started_at", num(*it, "started_at")},
              {"running_s", std::max<int64_t>(0, now - num(*it, "started_at")) / 1000}};
}

Json frameJson(const Frame& f) {
  Json rows = Json::array();
  int64_t memory = 0, denials = 0, executing = 0;
  bool measured = false;  // any sandbox's memory known: else the total is unknown, not 0
  for (const auto& r : f.rows) {
    const Json& sb = r.sandbox;
    Json exec = executionOf(sb, f.at);
    executing += exec.is_null() ? 0 : 1;
    denials += reviewDenials(sb);
    if (r.usage) memory += r.usage->memory_bytes, measured = true;
    rows.push_back(
        {{"id", str(sb, "id")},
         {"name", str(sb, "name")},
         {"tenant", str(sb, "tenant")},
         {"profile", str(sb, "profile")},
         {"backend", str(sb, "isolation")},
         {"state", str(sb, "state")},
         {"age_s", std::max<int64_t>(0, f.at - num(sb, "created_at")) / 1000},
         {"cpu_percent", r.cpu_pct ? Json(*r.cpu_pct) : Json()},
         {"memory_bytes", r.usage ? Json(r.usage->memory_bytes) : Json()},
         {"memory_limit_bytes",
          r.usage && r.usage->memory_limit_bytes > 0 ? Json(r.usage->memory_limit_bytes) : Json()},
         {"current_execution", exec},
         {"recent_denials", sb.value("recent_denials", Json::object())}});
  }
  return {{"sampled_at", f.at},
          {"totals",
           {{"sandboxes", f.rows.size()},
            {"executing", executing},
            {"memory_bytes", measured ? Json(memory) : Json()},
            {"review_denials", denials}}},
          {"sandboxes", rows}};
}

// The frame as text lines, each cut to `width` columns (0: no limit).
std::string frameText(const Json& frame, size_t width) {
  const Json& t = frame["totals"];
  std::ostringstream out;
  auto line = [&](std::string s) {
    if (width > 0 && s.size() > width) s.resize(width);
    out << s << "\n";
  };
  line("airlock top  sandboxes: " + std::to_string(num(t, "sandboxes")) +
       "  executing: " + std::to_string(num(t, "executing")) +
       "  memory: " + (t["memory_bytes"].is_number() ? bytesText(num(t, "memory_bytes")) : "-") +
       "  review denials: " + std::to_string(num(t, "review_denials")));
  line("");
  std::vector<std::vector<std::string>> rows = {{"ID", "TENANT", "PROFILE", "BACKEND", "AGE",
                                                 "STATE", "CPU%", "MEM", "EXECUTION", "DENIALS"}};
  for (const auto& r : frame["sandboxes"]) {
    char cpu[16] = "-";
    if (r["cpu_percent"].is_number())
      std::snprintf(cpu, sizeof cpu, "%.1f", r["cpu_percent"].get<double>());
    std::string mem = "-";
    if (r["memory_bytes"].is_number()) {
      mem = bytesText(r["memory_bytes"].get<int64_t>());
      if (r["memory_limit_bytes"].is_number())
        mem += "/" + bytesText(r["memory_limit_bytes"].get<int64_t>());
    }
    std::string exec = "-";
    if (r["current_execution"].is_object())
      exec = str(r["current_execution"], "kind") + " " +
             humanDuration(num(r["current_execution"], "running_s") * 1000);
    // Each cause the supervisor counts, in its order ("review 1", later "network 3" too).
    std::string denials;
    for (const auto& [cause, count] : r["recent_denials"].items())
      if (count.is_number())
        denials +=
            (denials.empty() ? "" : ", ") + cause + " " + std::to_string(count.get<int64_t>());
    if (denials.empty()) denials = "-";
    rows.push_back({str(r, "id"), str(r, "tenant"), str(r, "profile"), str(r, "backend"),
                    humanDuration(num(r, "age_s") * 1000), str(r, "state"), cpu, mem, exec,
                    denials});
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows) {
    std::string s;
    for (size_t i = 0; i < row.size(); ++i)
      s += row[i] + (i + 1 < row.size() ? std::string(w[i] - row[i].size() + 2, ' ') : "");
    line(s);
  }
  return out.str();
}

volatile std::sig_atomic_t g_quit = 0;
void onQuitSignal(int) { g_quit = 1; }

// The terminal while the live view runs: alternate screen, no cursor, keys read one at a time
// without echo. Restored by the destructor, whatever ends the view.
class LiveTerminal {
 public:
  LiveTerminal() {
    raw_ = ::tcgetattr(STDIN_FILENO, &saved_) == 0;
    if (raw_) {
      termios t = saved_;
      t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT
      t.c_cc[VMIN] = 0;
      t.c_cc[VTIME] = 0;
      ::tcsetattr(STDIN_FILENO, TCSANOW, &t);
    }
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~LiveTerminal() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (raw_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  LiveTerminal(const LiveTerminal&) = delete;
  LiveTerminal& operator=(const LiveTerminal&) = delete;

  size_t width() const {
    winsize ws{};
    return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
  }
  // Waits up to `ms` for a key; true when it asks to quit (q, Q) or a signal did.
  bool waitForQuit(int ms) {
    int64_t until = nowMs() + ms;
    while (!g_quit) {
      int64_t left = until - nowMs();
      if (left <= 0) return false;
      // Keys only from a terminal; otherwise (stdin from /dev/null) signals alone end the view.
      pollfd p{STDIN_FILENO, POLLIN, 0};
      int n = ::poll(raw_ ? &p : nullptr, raw_ ? 1 : 0, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0;
      char key = 0;
      ssize_t got = ::read(STDIN_FILENO, &key, 1);
      if (got == 0) return true;  // stdin closed: nobody left to watch
      if (key == 'q' || key == 'Q') return true;
    }
    return true;
  }

 private:
  termios saved_{};
  bool raw_ = false;
};

}  // namespace

int topCommand(const std::vector<std::string>& args) {
  double interval = 2;
  std::string sort = "cpu";
  bool once = false, json = false;
  po::options_description opts(kTopUsage);
  opts.add_options()("interval", po::value(&interval), "seconds between frames (default 2)")(
      "sort", po::value(&sort), "row order: cpu (default), mem or age (oldest first)")(
      "once", po::bool_switch(&once), "print one frame and exit")(
      "json", po::bool_switch(&json), "print the frame's data as JSON (with --once: one frame)");
  po::variables_map vm;
  std::vector<std::string> positional;
  if (auto exit = parseArgs("top", args, opts, vm, positional)) return *exit;
  if (!positional.empty())
    return report("top: unexpected argument '" + positional[0] + "'"), kExitFailed;
  if (!(interval >= 0.1 && interval <= 3600))
    return report("top: --interval " + std::to_string(interval) + ": expected 0.1 to 3600 seconds"),
           kExitFailed;
  if (sort != "cpu" && sort != "mem" && sort != "age")
    return report("top: --sort '" + sort + "': expected cpu, mem or age"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;

  auto render = [&](Frame& f, size_t width) {
    sortRows(f.rows, sort);
    Json data = frameJson(f);
    return json ? data.dump(once ? 2 : -1) + "\n" : frameText(data, width);
  };
  // Without a terminal (a pipe, a script) frames follow one another.
  const bool live = !once && !json && ::isatty(STDOUT_FILENO);
  if (!live) {
    std::optional<Frame> previous;
    for (;;) {
      auto f = sampleFrame(*c, previous ? &*previous : nullptr);
      if (!f) return report("top: " + f.error().message()), kExitFailed;
      std::cout << render(*f, 0) << std::flush;
      if (once) return 0;
      previous = std::move(*f);
      ::usleep(static_cast<useconds_t>(interval * 1e6));
    }
  }

  struct sigaction sa {};
  sa.sa_handler = onQuitSignal;  // no SA_RESTART: the wait for a key wakes up
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::optional<Frame> previous;
  std::string failure;
  {
    LiveTerminal term;
    do {
      auto f = sampleFrame(*c, previous ? &*previous : nullptr);
      if (!f) {
        failure = f.error().message();
        break;
      }
      std::cout << "\x1b[H\x1b[2J" << render(*f, term.width()) << "(q to quit)" << std::flush;
      previous = std::move(*f);
    } while (!term.waitForQuit(static_cast<int>(interval * 1000)));
  }
  if (!failure.empty()) return report("top: " + failure), kExitFailed;
  return 0;
}

}  // namespace airlock::cli
