#include "supervisor/images/debian_build.h"

#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "airlock/policy/keys.h"
#include "airlock/whole_file.h"
#include "supervisor/images/rootfs_finish.h"

namespace airlock::images {
namespace {

constexpr const char* kMmdebstrap = "/usr/bin/mmdebstrap";
constexpr const char* kUnshare = "/usr/bin/unshare";
constexpr const char* kDpkgQuery = "/usr/bin/dpkg-query";

std::string hostCodename() {
  auto text = readWholeFile("/etc/os-release", 1 << 16);
  if (!text) return "";
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("VERSION_CODENAME=")) continue;
    std::string v = line.substr(17);
    std::erase(v, '"');
    return v;
  }
  return "";
}

// The host's first archive URI, from deb822 .sources or one-line .list files.
std::string hostMirrorUri() {
  for (const char* f : {"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"}) {
    auto text = readWholeFile(f, 1 << 20);
    if (!text) continue;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string w, uri;
      words >> w;
      if (w == "URIs:") words >> uri;
      if (w == "deb") {
        words >> uri;
        if (uri.starts_with("[")) {  // deb [options] uri
          while (!uri.ends_with("]") && words >> uri) {
          }
          words >> uri;
        }
      }
      if (uri.starts_with("http://") || uri.starts_with("https://")) return uri;
    }
  }
  return "http://deb.debian.org/debian";
}

}  // namespace

Result<ImageSpec> resolveSpec(ImageSpec spec) {
  const std::string host = hostCodename();
  if (spec.suite.empty()) spec.suite = host;
  if (spec.suite.empty())
    return fail("debian.suite: not set and the host's /etc/os-release names no VERSION_CODENAME");
  if (spec.mirror.empty()) {
    // The host's own sources (mirrors, security and updates suites) when the suite is the
    // host's; for another suite, the host's archive URI with that suite.
    struct stat st {};
    const char* sources = "/etc/apt/sources.list.d/debian.sources";
    spec.mirror = spec.suite == host && ::stat(sources, &st) == 0 ? sources : hostMirrorUri();
  }
  return spec;
}

Result<BuildResult> buildDebianRootfs(const ImageSpec& spec_in, const std::string& rootfs,
                                      const BuildOptions& options) {
  AIRLOCK_TRY_CTX(spec, resolveSpec(spec_in), "image build");
  std::vector<std::string> argv = {kUnshare, "--mount", "--propagation", "private", "--",
                                   kMmdebstrap, "--mode=root", "--variant=" + spec.variant,
                                   // No fsync per file: a failed build is thrown away whole.
                                   "--dpkgopt=force-unsafe-io"};
  if (!spec.packages.empty()) {
    std::string include;
    for (const auto& p : spec.packages) include += (include.empty() ? "" : ",") + p;
    argv.push_back("--include=" + include);
  }
  if (!options.apt_cache.empty()) {
    if (options.apt_cache.front() != '/' ||
        options.apt_cache.find_first_of("'\\\n") != std::string::npos)
      return fail("image build: the apt cache must be an absolute path without quotes",
                  options.apt_cache);
    const std::string cache = "'" + options.apt_cache + "'";
    // Keep downloaded packages (they are the cache's now) and bind the cache for apt; it is
    // unbound before mmdebstrap's cleanup empties the tree's /var/cache/apt/archives.
    argv.push_back("--skip=essential/unlink");
    argv.push_back("--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives && mount --bind " + cache +
                   " \"$1\"/var/cache/apt/archives");
    argv.push_back("--customize-hook=umount \"$1\"/var/cache/apt/archives");
  }
  argv.push_back(spec.suite);
  argv.push_back(rootfs);
  argv.push_back(spec.mirror);
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  say("mmdebstrap " + spec.suite + " (" + spec.variant + ", " +
      std::to_string(spec.packages.size()) + " package(s)) from " + spec.mirror);
  if (auto r = runTool({.argv = argv, .progress = options.progress}); !r)
    return Unexpected(std::move(r.error()).wrap("image build: mmdebstrap"));

  BuildResult out{.resolved = spec};
  AIRLOCK_TRY_CTX(listing,
                  toolOutput({.argv = {kDpkgQuery, "--admindir=" + rootfs + "/var/lib/dpkg", "-W",
                                       "-f=${Package} ${Version} ${Architecture}\\n"}}),
                  "image build: listing the installed packages");
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.packages.push_back(line);
  std::sort(out.packages.begin(), out.packages.end());
  std::string identity = canonicalSpec(spec) + "installed\n";
  for (const auto& p : out.packages) identity += p + "\n";
  out.digest = "sha256:" + policy::sha256Hex(identity);
  if (auto r = finishRootfs(rootfs); !r)
    return Unexpected(std::move(r.error()).wrap("image build"));
  return out;
}

}  // namespace airlock::images
