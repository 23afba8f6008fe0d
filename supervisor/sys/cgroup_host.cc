// Which cgroup hierarchies the host has (CgroupHost: v1, v2 or hybrid, from mountinfo), their
// controllers, and where each limit would be enforced.
#include "supervisor/sys/cgroup.h"

#include <algorithm>
#include <sstream>

#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sys {

namespace cgroup_detail {

const char* controllerForLimit(int i) {
  static const char* k[] = {"memory", "pids", "cpu"};
  return k[i];
}

bool limitSet(const CgroupLimits& l, int i) {
  switch (i) {
    case 0:
      return l.memory_bytes != 0;
    case 1:
      return l.pids != 0;
    default:
      return l.cpu_percent != 0;
  }
}

}  // namespace cgroup_detail

using namespace cgroup_detail;

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountField(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<std::string_view> splitWs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

const std::set<std::string_view>& knownV1Controllers() {
  static const std::set<std::string_view> k = {
      "cpu",   "cpuacct",    "cpuset",   "memory",  "devices", "freezer", "net_cls",
      "blkio", "perf_event", "net_prio", "hugetlb", "pids",    "rdma",    "misc"};
  return k;
}

}  // namespace

const char* cgroupLayoutName(CgroupLayout layout) {
  switch (layout) {
    case CgroupLayout::kNone:
      return "none";
    case CgroupLayout::kV1:
      return "v1";
    case CgroupLayout::kV2:
      return "v2";
    case CgroupLayout::kHybrid:
      return "hybrid";
  }
  return "?";
}

bool CgroupHost::v2_has(std::string_view controller) const {
  return !v2_mount.empty() && v2_controllers.count(std::string(controller)) != 0;
}

Result<CgroupHost> CgroupHost::parseMountinfo(std::string_view text,
                                              const std::string& root_prefix) {
  CgroupHost host;
  int lineno = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++lineno;
    if (line.empty()) continue;
    auto f = splitWs(line);
    auto sep = std::find(f.begin(), f.end(), std::string_view("-"));
    if (f.size() < 7 || sep == f.end() || f.end() - sep < 3) {
      return fail("malformed mountinfo line " + std::to_string(lineno), std::string(line));
    }
    std::string_view fstype = sep[1];
    std::string_view super = f.end() - sep >= 4 ? sep[3] : std::string_view();
    std::string mount_point = root_prefix + unescapeMountField(f[4]);
    if (fstype == "cgroup2") {
      if (host.v2_mount.empty()) host.v2_mount = mount_point;
    } else if (fstype == "cgroup") {
      size_t i = 0;
      while (i <= super.size()) {
        size_t j = super.find(',', i);
        if (j == std::string_view::npos) j = super.size();
        std::string_view opt = super.substr(i, j - i);
        if (knownV1Controllers().count(opt) != 0 && host.v1_mounts.count(std::string(opt)) == 0) {
          host.v1_mounts.emplace(std::string(opt), mount_point);
        }
        i = j + 1;
      }
    }
  }
  bool v1 = !host.v1_mounts.empty();
  bool v2 = !host.v2_mount.empty();
  host.layout = v1 && v2 ? CgroupLayout::kHybrid
                : v1     ? CgroupLayout::kV1
                : v2     ? CgroupLayout::kV2
                         : CgroupLayout::kNone;
  return host;
}

Result<CgroupHost> CgroupHost::detect(const std::string& mountinfo,
                                      const std::string& root_prefix) {
  AIRLOCK_TRY_CTX(text, readControl(mountinfo), "detect cgroups");
  AIRLOCK_TRY_CTX(host, parseMountinfo(text, root_prefix), "detect cgroups");
  if (!host.v2_mount.empty()) {
    auto ctl = readControl(host.v2_mount + "/cgroup.controllers");
    if (!ctl) return Unexpected(std::move(ctl.error()).wrap("detect cgroups"));
    // "cpuset cpu io memory pids\n": split by hand, the only stream on the run's path.
    std::string_view rest = *ctl;
    while (!rest.empty()) {
      size_t start = rest.find_first_not_of(" \t\n");
      if (start == std::string_view::npos) break;
      size_t end = rest.find_first_of(" \t\n", start);
      if (end == std::string_view::npos) end = rest.size();
      host.v2_controllers.emplace(rest.substr(start, end - start));
      rest.remove_prefix(end);
    }
  }
  return host;
}

std::string CgroupHost::describe() const {
  std::ostringstream out;
  out << "layout " << cgroupLayoutName(layout) << "\n";
  if (!v2_mount.empty()) {
    out << "v2 " << v2_mount << ": controllers";
    if (v2_controllers.empty()) out << " (none)";
    for (const auto& c : v2_controllers) out << " " << c;
    out << "\n";
  }
  std::map<std::string, std::string> by_mount;
  for (const auto& [c, m] : v1_mounts) {
    auto& s = by_mount[m];
    if (!s.empty()) s += ",";
    s += c;
  }
  for (const auto& [m, cs] : by_mount) out << "v1 " << m << ": " << cs << "\n";
  return out.str();
}

std::map<std::string, std::string> CgroupHost::limitPlacement() const {
  std::map<std::string, std::string> out;
  for (int i = 0; i < 3; ++i) {
    std::string c = controllerForLimit(i);
    if (v2_has(c)) {
      out[c] = "v2 " + v2_mount;
    } else if (auto it = v1_mounts.find(c); it != v1_mounts.end()) {
      out[c] = "v1 " + it->second;
    } else {
      out[c] = "unavailable";
    }
  }
  return out;
}

}  // namespace airlock::sys
