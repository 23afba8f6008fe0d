// airlock sandbox create|ls|get|rm|keepalive: the sandboxes of a running `airlock serve`, managed
// through its HTTP API (docs/api.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

using client::percentEncode;

constexpr const char* kSandboxUsage = R"(Usage:
  airlock sandbox create [--profile P] [--language L] [--name N] [--env K=V]... [--meta K=V]...
                         [--keep-alive S] [--lifetime S] [--persistent]
                         [--mount SOURCE[:PATH][:rw]]... [--json]
  airlock sandbox ls [--meta K=V]... [--json]
  airlock sandbox get SB [--json]
  airlock sandbox rm SB...
  airlock sandbox keepalive SB [--keep-alive S] [--lifetime S] [--json]

Manages sandboxes of a running `airlock serve`. SB is a sandbox id or name. The supervisor is
found from AIRLOCK_URL (unix:///path/to.sock or http://127.0.0.1:PORT; default
unix:///run/airlock/airlock.sock) and AIRLOCK_TOKEN (sent as a bearer token).

--mount shows a host directory the operator declared ([transfer] roots) inside the sandbox:
SOURCE is hostdir:ROOT or hostdir:ROOT/sub/dir, PATH where it appears (under /mnt; default
/mnt/ROOT[/sub/dir]), rw makes it writable (only roots in [transfer] writable_roots; read-only
otherwise). E.g. --mount hostdir:datasets/imagenet:/mnt/imagenet:rw, --mount hostdir:datasets.

Exit code: 0 on success; 125 when the request failed (bad flags, supervisor not reachable, or
an error answer such as an unknown sandbox).
)";

// --mount SOURCE[:PATH][:rw] as a Mount of the API. SOURCE (hostdir:ROOT[/sub/dir]) holds a
// colon itself: what follows "hostdir:" splits on ':' into the root's path, then an absolute PATH
// and/or "rw".
Result<Json> parseMount(const std::string& spec) {
  constexpr std::string_view kScheme = "hostdir:";
  auto bad = [&] {
    return fail("--mount '" + spec + "': expected hostdir:ROOT[/sub/dir][:PATH][:rw]");
  };
  if (!spec.starts_with(kScheme)) return bad();
  std::vector<std::string> parts;
  std::string_view rest = std::string_view(spec).substr(kScheme.size());
  for (size_t at = 0;;) {
    size_t colon = rest.find(':', at);
    parts.emplace_back(rest.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  if (parts[0].empty()) return bad();
  Json mount = Json::object();
  mount["source"] = std::string(kScheme) + parts[0];
  size_t i = 1;
  if (i < parts.size() && parts[i].starts_with('/')) mount["path"] = parts[i++];
  if (i < parts.size() && parts[i] == "rw") {
    mount["writable"] = true;
    ++i;
  }
  if (i != parts.size()) return bad();
  return mount;
}

// A sandbox's mounts, one a line: "hostdir:ROOT/sub at /mnt/x (read-only)".
std::vector<std::string> mountLines(const Json& sb) {
  std::vector<std::string> out;
  if (!sb.contains("mounts") || !sb["mounts"].is_array()) return out;
  for (const auto& m : sb["mounts"])
    out.push_back(str(m, "source") + " at " + str(m, "path") +
                  (flag(m, "writable") ? " (read-write)" : " (read-only)"));
  return out;
}

std::string metadataText(const Json& sb) {
  std::string out;
  if (!sb.contains("metadata") || !sb["metadata"].is_object()) return out;
  for (const auto& [k, v] : sb["metadata"].items())
    out += (out.empty() ? "" : ",") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

void printSandbox(const Json& sb) {
  int64_t now = nowMs();
  auto ago = [&](const char* key) {
    int64_t at = num(sb, key);
    return at > 0 ? humanDuration(std::max<int64_t>(0, now - at)) + " ago" : std::string("-");
  };
  std::vector<std::vector<std::string>> rows = {
      {"id:", str(sb, "id")},
      {"name:", str(sb, "name").empty() ? "-" : str(sb, "name")},
      {"tenant:", str(sb, "tenant")},
      {"profile:", str(sb, "profile")},
      {"language:", str(sb, "language")},
      {"state:", str(sb, "state")},
      {"persistent:", flag(sb, "persistent") ? "yes" : "no"},
      {"metadata:", metadataText(sb).empty() ? "-" : metadataText(sb)},
      {"created:", ago("created_at")},
      {"last active:", ago("last_active_at")},
      {"keep-alive:", std::to_string(num(sb, "keep_alive_s")) + "s"},
      {"idle expires:", untilText(num(sb, "idle_expires_at"), now)},
      {"lifetime:", std::to_string(num(sb, "lifetime_s")) + "s"},
      {"ends:", untilText(num(sb, "ends_at"), now)},
      {"commands running:", std::to_string(num(sb, "commands_running"))},
      {"contexts:", std::to_string(num(sb, "contexts"))},
  };
  auto mounts = mountLines(sb);
  if (mounts.empty()) mounts.push_back("-");
  for (size_t i = 0; i < mounts.size(); ++i) rows.push_back({i == 0 ? "mounts:" : "", mounts[i]});
  printTable(rows);
}

int sandboxCreate(const std::vector<std::string>& args) {
  std::string profile, language, name;
  std::vector<std::string> env, meta, mounts, positional;
  int64_t keep_alive = 0, lifetime = 0;
  bool persistent = false, json = false;
  po::options_description opts("Usage: airlock sandbox create [options]\n\nOptions");
  opts.add_options()("profile,p", po::value(&profile), "profile of the supervisor's policy")(
      "language,lang,l", po::value(&language), "default language of `airlock code` calls")(
      "name,n", po::value(&name), "a name, unique among your sandboxes ([a-zA-Z0-9._-]{1,63})")(
      "env,e", po::value(&env)->composing(), "K=V for every process in the sandbox (repeatable)")(
      "meta", po::value(&meta)->composing(), "K=V metadata to find it by (repeatable)")(
      "keep-alive", po::value(&keep_alive), "seconds it may sit idle before it is destroyed")(
      "lifetime", po::value(&lifetime), "seconds until it is destroyed, whatever the activity")(
      "persistent", po::bool_switch(&persistent),
      "keep /home/user on disk for the next sandbox of the same --name")(
      "mount", po::value(&mounts)->composing(),
      "SOURCE[:PATH][:rw]: a host directory inside, read-only unless rw (repeatable)")(
      "json", po::bool_switch(&json), "print the sandbox as JSON instead of its id");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox create", args, opts, vm, positional)) return *exit;
  if (!positional.empty()) {
    report("sandbox create: unexpected argument '" + positional[0] + "'");
    return kExitFailed;
  }
  Json body = Json::object();
  if (!profile.empty()) body["profile"] = profile;
  if (!language.empty()) body["language"] = language;
  if (!name.empty()) body["name"] = name;
  auto env_map = parseKeyValues(env, "--env");
  auto meta_map = parseKeyValues(meta, "--meta");
  if (!env_map || !meta_map) {
    report("sandbox create: " + (!env_map ? env_map : meta_map).error().message());
    return kExitFailed;
  }
  if (!env_map->empty()) body["env"] = *env_map;
  if (!meta_map->empty()) body["metadata"] = *meta_map;
  if (vm.count("keep-alive")) body["keep_alive_s"] = keep_alive;
  if (vm.count("lifetime")) body["lifetime_s"] = lifetime;
  if (persistent) body["persistent"] = true;
  for (const auto& spec : mounts) {
    auto mount = parseMount(spec);
    if (!mount) return report("sandbox create: " + mount.error().message()), kExitFailed;
    body["mounts"].push_back(std::move(*mount));
  }
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("POST", "/v1/sandboxes", body), [&](const Json& sb) {
    std::cout << (json ? sb.dump(2) : str(sb, "id")) << "\n";
    return 0;
  });
}

int sandboxList(const std::vector<std::string>& args) {
  std::vector<std::string> meta, positional;
  std::string node;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox ls [options]\n\nOptions");
  opts.add_options()("meta", po::value(&meta)->composing(),
                     "K=V: only sandboxes with this metadata (repeatable)")(
      "node", po::value(&node),
      "one node of a fleet (default behind a fleet's proxy: every node, docs/deploy.md)")(
      "json", po::bool_switch(&json), "print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox ls", args, opts, vm, positional)) return *exit;
  auto meta_map = parseKeyValues(meta, "--meta");
  if (!meta_map) return report("sandbox ls: " + meta_map.error().message()), kExitFailed;
  std::string target = "/v1/sandboxes";
  char sep = '?';
  for (const auto& [k, v] : *meta_map) {
    target += sep + ("metadata." + percentEncode(k)) + "=" + percentEncode(v);
    sep = '&';
  }
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  auto onNode = [&](const std::string& n) {
    return n.empty() ? target : target + sep + "node=" + percentEncode(n);
  };
  auto listed = c->call("GET", onNode(node));
  // A fleet's proxy cannot merge the nodes' lists and says so: ask each node it names.
  if (!listed && node.empty() &&
      listed.error().message().find("this fleet lists per node") != std::string::npos) {
    auto fleet = c->call("GET", "/v1/fleet");
    listed = fleet;
    if (fleet && fleet->contains("nodes") && (*fleet)["nodes"].is_array()) {
      Json all = {{"sandboxes", Json::array()}};
      listed = all;
      for (const auto& n : (*fleet)["nodes"]) {
        if (!n.is_string()) continue;
        auto one = c->call("GET", onNode(n.get<std::string>()));
        if (!one) {  // a node that is down fails the list: nothing is left out silently
          listed = std::move(one);
          break;
        }
        if (one->contains("sandboxes") && (*one)["sandboxes"].is_array())
          for (auto& sb : (*one)["sandboxes"]) (*listed)["sandboxes"].push_back(std::move(sb));
      }
    }
  }
  return orFail(std::move(listed), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    int64_t now = nowMs();
    std::vector<std::vector<std::string>> rows = {
        {"ID", "NAME", "PROFILE", "STATE", "AGE", "IDLE-EXPIRES"}};
    if (answer.contains("sandboxes") && answer["sandboxes"].is_array())
      for (const auto& sb : answer["sandboxes"]) {
        int64_t created = num(sb, "created_at");
        rows.push_back({str(sb, "id"), str(sb, "name").empty() ? "-" : str(sb, "name"),
                        str(sb, "profile"), str(sb, "state"),
                        created > 0 ? humanDuration(std::max<int64_t>(0, now - created)) : "-",
                        untilText(num(sb, "idle_expires_at"), now)});
      }
    printTable(rows);
    return 0;
  });
}

int sandboxGet(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox get SB [options]\n\nOptions");
  opts.add_options()("json", po::bool_switch(&json), "print the sandbox as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox get", args, opts, vm, positional)) return *exit;
  if (positional.size() != 1) return report("sandbox get: expected one SB"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("GET", sandboxTarget(positional[0])), [&](const Json& sb) {
    if (json)
      std::cout << sb.dump(2) << "\n";
    else
      printSandbox(sb);
    return 0;
  });
}

int sandboxRemove(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  po::options_description opts("Usage: airlock sandbox rm SB...\n\nOptions");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox rm", args, opts, vm, positional)) return *exit;
  if (positional.empty()) return report("sandbox rm: expected at least one SB"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  int exit = 0;
  for (const auto& sb : positional) {
    auto r = c->call("DELETE", sandboxTarget(sb));
    if (!r) {
      report(r.error().message());
      exit = kExitFailed;
    } else {
      std::cout << sb << "\n";
    }
  }
  return exit;
}

int sandboxKeepAlive(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  int64_t keep_alive = 0, lifetime = 0;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox keepalive SB [options]\n\nOptions");
  opts.add_options()("keep-alive", po::value(&keep_alive), "new idle limit in seconds")(
      "lifetime", po::value(&lifetime), "new lifetime in seconds (from creation)")(
      "json", po::bool_switch(&json), "print the sandbox as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox keepalive", args, opts, vm, positional)) return *exit;
  if (positional.size() != 1) return report("sandbox keepalive: expected one SB"), kExitFailed;
  Json body = Json::object();
  if (vm.count("keep-alive")) body["keep_alive_s"] = keep_alive;
  if (vm.count("lifetime")) body["lifetime_s"] = lifetime;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("POST", sandboxTarget(positional[0]) + "/keepalive", body),
                [&](const Json& sb) {
                  int64_t now = nowMs();
                  if (json)
                    std::cout << sb.dump(2) << "\n";
                  else
                    // The lifetime counts from creation: say it as set, and when that is.
                    std::cout << positional[0] << ": idle expires "
                              << untilText(num(sb, "idle_expires_at"), now) << ", lifetime "
                              << humanDuration(num(sb, "lifetime_s") * 1000) << " (ends "
                              << untilText(num(sb, "ends_at"), now) << ")\n";
                  return 0;
                });
}
}  // namespace

int sandboxCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kSandboxUsage;
    return args.empty() ? kExitFailed : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& verb = args[0];
  if (verb == "create") return sandboxCreate(rest);
  if (verb == "ls" || verb == "list") return sandboxList(rest);
  if (verb == "get") return sandboxGet(rest);
  if (verb == "rm" || verb == "delete") return sandboxRemove(rest);
  if (verb == "keepalive") return sandboxKeepAlive(rest);
  report("sandbox: unknown subcommand '" + verb + "'\n" + kSandboxUsage);
  return kExitFailed;
}

}  // namespace airlock::cli
