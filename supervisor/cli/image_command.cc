// airlock image build|import|ls|inspect|rm: the image store (docs/images.md), and
// airlock image prepare: the microVM backend's boot artifacts (image_prepare_command.cc).
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "airlock/policy/image_name.h"
#include "supervisor/cli/cli.h"
#include "supervisor/images/debian_build.h"
#include "supervisor/images/oci_import.h"
#include "supervisor/images/spec.h"
#include "supervisor/images/store.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {
namespace {

constexpr const char* kUsage = R"(Usage:
  airlock image build SPEC.toml [--name NAME] [--apt-cache DIR|none]
                         a root filesystem from the Debian archive (mmdebstrap) as the spec says
  airlock image import ARCHIVE [--name NAME]
                         an OCI image archive (skopeo copy … oci-archive:) or a docker save
                         archive; every layer is checked before anything is unpacked
  airlock image ls [--json]            the store's images: name, digest, size, created, source
  airlock image inspect NAME           one image's metadata (JSON)
  airlock image rm NAME...             remove names; an image no name points at is deleted
  airlock image prepare [--policy FILE] [--profile NAME]... [--keep-old]
                         prepare what microVM sandboxes boot (kernel, initramfs, images)

Every command but prepare takes --store DIR (default $AIRLOCK_IMAGE_STORE, else
/var/lib/airlock/images). A profile uses an image by name:
  [profiles.X.filesystem]
  image = "NAME"
)";

using Clock = std::chrono::steady_clock;

struct Common {
  std::string store = images::defaultStoreRoot();
  std::string name;
  std::string apt_cache = "/var/cache/apt/archives";
  bool json = false;
  std::vector<std::string> positional;
};

Result<Common> parseArgs(const std::string& sub, const std::vector<std::string>& args) {
  Common c;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--store" && has_value) {
      c.store = args[++i];
    } else if (a == "--name" && has_value && (sub == "build" || sub == "import")) {
      c.name = args[++i];
    } else if (a == "--apt-cache" && has_value && sub == "build") {
      c.apt_cache = args[++i] == "none" ? "" : args[i];
    } else if (a == "--json" && sub == "ls") {
      c.json = true;
    } else if (!a.starts_with("-")) {
      c.positional.push_back(a);
    } else {
      return fail("image " + sub + ": unexpected argument '" + a + "'");
    }
  }
  return c;
}

std::string isoNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::ostringstream o;
  o << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return o.str();
}

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

// An image name from an archive's file name: "pandas-1.5.oci.tar" → "pandas-1.5".
std::string nameFromArchive(const std::string& path) {
  std::string base = std::filesystem::path(path).filename().string();
  for (const char* ext : {".gz", ".zst", ".tar", ".oci", ".docker"})
    if (base.ends_with(ext)) base.resize(base.size() - std::strlen(ext));
  std::string out;
  for (char c : base) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : (c == '.' || c == '_' ? c : '-');
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  return out;
}

images::Progress progressFor(const std::string& sub) {
  return [sub](const std::string& line) {
    std::cerr << "airlock: image " << sub << ": " << line << "\n";
  };
}

// Takes the store's lock, stages, runs `fill` into the staging directory and publishes it.
// Any failure leaves the store as it was: the staging directory goes with its owner.
template <typename Fill>
int stageAndPublish(const std::string& sub, const Common& c, const std::string& name, Fill fill) {
  const auto t0 = Clock::now();
  auto say = progressFor(sub);
  auto store = images::Store::open(c.store, true);
  if (!store) return printError("image " + sub + ": " + store.error().message()), 125;
  auto lock = store->lock(say);
  if (!lock) return printError("image " + sub + ": " + lock.error().message()), 125;
  auto staging = store->stage();
  if (!staging) return printError("image " + sub + ": " + staging.error().message()), 125;
  auto made = fill(*staging);  // Result<std::pair<digest, meta>>
  if (!made) {
    printError(made.error().message());
    return sandbox::kExitAirlockError;
  }
  auto& [digest, meta] = *made;
  const uint64_t bytes = images::treeBytes(staging->rootfs());
  meta["name"] = name;
  meta["created"] = isoNow();
  meta["size_bytes"] = bytes;
  meta["seconds"] = std::round(secondsSince(t0) * 10) / 10;
  if (auto r = store->publish(*staging, name, digest, meta); !r) {
    printError("image " + sub + ": " + r.error().message());
    return sandbox::kExitAirlockError;
  }
  std::ostringstream took;
  took << std::fixed << std::setprecision(1) << secondsSince(t0);
  say(name + " is " + digest + " (" + mib(bytes) + ", " + took.str() + " s)");
  std::cout << name << " " << digest << "\n";
  return 0;
}

int buildCommand(const Common& c) {
  if (c.positional.size() != 1)
    return printError("image build: which spec? `airlock image build SPEC.toml`"), 125;
  auto spec = images::loadSpec(c.positional[0]);
  if (!spec) return printError("image build: " + spec.error().message()), 125;
  const std::string name = c.name.empty() ? spec->name : c.name;
  return stageAndPublish(
      "build", c, name,
      [&](const images::Staging& staging) -> Result<std::pair<std::string, nlohmann::json>> {
        auto built = images::buildDebianRootfs(
            *spec, staging.rootfs(), {.apt_cache = c.apt_cache, .progress = progressFor("build")});
        if (!built) return Unexpected(built.error());
        const auto& r = built->resolved;
        nlohmann::json meta = {{"source",
                                {{"kind", "spec"},
                                 {"file", std::filesystem::absolute(spec->source).string()},
                                 {"suite", r.suite},
                                 {"mirror", r.mirror},
                                 {"variant", r.variant},
                                 {"packages", r.packages}}},
                               {"packages", built->packages}};
        return std::pair(built->digest, std::move(meta));
      });
}

int importCommand(const Common& c) {
  if (c.positional.size() != 1)
    return printError("image import: which archive? `airlock image import ARCHIVE`"), 125;
  const std::string archive = c.positional[0];
  const std::string name = c.name.empty() ? nameFromArchive(archive) : c.name;
  if (auto why = policy::imageNameProblem(name))
    return printError("image import: name '" + name + "': " + *why + " (give one with --name)"),
           125;
  return stageAndPublish(
      "import", c, name,
      [&](const images::Staging& staging) -> Result<std::pair<std::string, nlohmann::json>> {
        auto imported = images::importOciArchive(archive, staging.path(), progressFor("import"));
        if (!imported) return Unexpected(imported.error());
        nlohmann::json meta = {{"source",
                                {{"kind", imported->format},
                                 {"file", std::filesystem::absolute(archive).string()},
                                 {"layers", imported->layers}}}};
        return std::pair(imported->digest, std::move(meta));
      });
}

int lsCommand(const Common& c) {
  auto store = images::Store::open(c.store, false);
  if (!store) return printError("image ls: " + store.error().message()), 125;
  auto all = store->list();
  if (!all) return printError("image ls: " + all.error().message()), 125;
  if (c.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& i : *all)
      out.push_back({{"name", i.name}, {"digest", i.digest}, {"meta", i.meta}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(24) << "NAME" << std::setw(21) << "DIGEST" << std::setw(10)
            << "SIZE" << std::setw(22) << "CREATED"
            << "SOURCE\n";
  for (const auto& i : *all) {
    const auto& m = i.meta;
    std::string source = m.contains("source") ? m["source"].value("kind", "?") : "?";
    if (m.contains("source") && m["source"].contains("file"))
      source += " " + m["source"].value("file", "");
    std::cout << std::setw(24) << (i.name.empty() ? "<none>" : i.name) << std::setw(21)
              << i.digest.substr(0, 19) << std::setw(10) << mib(m.value("size_bytes", 0ull))
              << std::setw(22) << m.value("created", "") << source << "\n";
  }
  return 0;
}

int inspectCommand(const Common& c) {
  if (c.positional.size() != 1) return printError("image inspect: which image?"), 125;
  auto store = images::Store::open(c.store, false);
  if (!store) return printError("image inspect: " + store.error().message()), 125;
  auto info = store->inspect(c.positional[0]);
  if (!info) return printError(info.error().message()), 125;
  nlohmann::json out = info->meta;
  out["name"] = info->name;
  out["digest"] = info->digest;
  out["rootfs"] = store->rootfsFor(info->name).value_or("");
  std::cout << out.dump(2) << "\n";
  return 0;
}

int rmCommand(const Common& c) {
  if (c.positional.empty()) return printError("image rm: which image?"), 125;
  auto store = images::Store::open(c.store, false);
  if (!store) return printError("image rm: " + store.error().message()), 125;
  auto lock = store->lock(progressFor("rm"));
  if (!lock) return printError("image rm: " + lock.error().message()), 125;
  int rc = 0;
  for (const auto& name : c.positional) {
    if (auto r = store->remove(name); !r) {
      printError(r.error().message());
      rc = sandbox::kExitAirlockError;
    } else {
      std::cout << "removed " << name << "\n";
    }
  }
  return rc;
}

}  // namespace

int imageCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? sandbox::kExitAirlockError : 0;
  }
  const std::string& sub = args[0];
  if (sub != "prepare" && wantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  if (sub == "prepare") return imagePrepareCommand({args.begin() + 1, args.end()});
  if (sub != "build" && sub != "import" && sub != "ls" && sub != "inspect" && sub != "rm") {
    printError("image: unknown subcommand '" + sub + "'\n" + kUsage);
    return sandbox::kExitAirlockError;
  }
  auto c = parseArgs(sub, args);
  if (!c) {
    printError(c.error().message() + "\n" + kUsage);
    return sandbox::kExitAirlockError;
  }
  if (sub == "build") return buildCommand(*c);
  if (sub == "import") return importCommand(*c);
  if (sub == "ls") return lsCommand(*c);
  if (sub == "inspect") return inspectCommand(*c);
  return rmCommand(*c);
}

}  // namespace airlock::cli
