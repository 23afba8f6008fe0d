#include "supervisor/packages/serving.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "url.h"  // the transfer plugin's strict URL parser (plugins/transfer/http)

namespace airlock::packages {
namespace {

constexpr uint64_t kMaxPageBytes = 256u << 20;  // the largest npm packuments run to ~100 MiB
constexpr size_t kMaxRememberedPages = 4096;

std::string withSlash(std::string s) {
  if (s.empty() || s.back() != '/') s += '/';
  return s;
}

std::string inQuotes(std::string_view s) { return "'" + std::string(s) + "'"; }

ProxyReply abandoned() {
  ProxyReply r;
  r.abandon = true;
  return r;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A path segment percent-decoded; nothing when it is malformed or decodes to a control
// character.
std::optional<std::string> decodeSegment(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hexValue(s[i + 1]), lo = hexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
    out += c;
  }
  return out;
}

bool plausibleProject(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool plausibleNpmVersion(std::string_view v) {
  if (v.empty() || v.size() > 100 || v.front() == '.') return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '+' ||
           c == '_';
  });
}

// What the sandbox's Accept may pass upstream: the media types npm uses, nothing else.
std::string npmAccept(std::string_view accept) {
  const bool clean = !accept.empty() && accept.size() <= 200 &&
                     std::all_of(accept.begin(), accept.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) ||
                              std::string_view(" .,;=/+*-").find(c) != std::string_view::npos;
                     });
  return clean ? std::string(accept) : "application/json";
}

// sha256, sha512 and sha1 of a stream, all at once (npm's dist names sha512 or sha1; the cache
// and pins use sha256).
class Hashes {
 public:
  Hashes() {
    for (auto* md : {EVP_sha256(), EVP_sha512(), EVP_sha1()}) {
      ctx_.push_back(EVP_MD_CTX_new());
      EVP_DigestInit_ex(ctx_.back(), md, nullptr);
    }
  }
  ~Hashes() {
    for (auto* c : ctx_) EVP_MD_CTX_free(c);
  }
  Hashes(const Hashes&) = delete;
  Hashes& operator=(const Hashes&) = delete;
  void update(std::string_view bytes) {
    for (auto* c : ctx_) EVP_DigestUpdate(c, bytes.data(), bytes.size());
  }
  // sha256 hex, sha512 base64, sha1 hex.
  void finish(std::string& sha256, std::string& sha512_base64, std::string& sha1) {
    sha256 = hex(digest(0));
    const std::string d512 = digest(1);
    std::string b64(4 * ((d512.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                  reinterpret_cast<const unsigned char*>(d512.data()),
                                  static_cast<int>(d512.size()));
    b64.resize(static_cast<size_t>(n));
    sha512_base64 = b64;
    sha1 = hex(digest(2));
  }

 private:
  std::string digest(size_t i) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_[i], out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
  }
  static std::string hex(const std::string& bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : bytes) {
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
    return out;
  }
  std::vector<EVP_MD_CTX*> ctx_;
};

// Counts `bytes` against the sandbox's total, unless that would pass max.
bool reserve(std::atomic<uint64_t>& served, uint64_t bytes, uint64_t max) {
  uint64_t current = served.load();
  do {
    if (bytes > max || current > max - bytes) return false;
  } while (!served.compare_exchange_weak(current, current + bytes));
  return true;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

ProxyReply jsonReply(unsigned status, const std::string& message) {
  ProxyReply r;
  r.status = status;
  r.reason = sanitizeReasonPhrase(message);
  r.content_type = "application/json";
  r.body = nlohmann::json{{"error", message}}.dump() + "\n";
  return r;
}

std::string sanitizeReasonPhrase(std::string_view message) {
  std::string out;
  for (char c : message) {
    if (out.size() == 300) break;
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

bool plausibleHost(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']';
  });
}

PackageService::PackageService(ProxyOptions options, AuditSink audit,
                               std::shared_ptr<UpstreamClient> upstream, DiskCache cache)
    : options_(std::move(options)),
      audit_(std::move(audit)),
      upstream_(std::move(upstream)),
      cache_(std::move(cache)),
      pypi_base_(withSlash(options_.pypi_index)),
      npm_base_(withSlash(options_.npm_registry)) {}

ProxyReply PackageService::handle(const ProxyRequest& req, const SandboxSession& s) {
  static const std::string kUsage =
      "airlock: the package proxy serves GET /pypi/simple/<project>/ and GET /npm/<package>";
  std::string_view target = req.target;
  if (target.empty() || target.front() != '/')
    return jsonReply(400, "airlock: only origin-form request targets ('/path') are served");
  target = target.substr(0, target.find_first_of("?#"));
  std::vector<std::string> parts;
  size_t pos = 1;
  for (;;) {
    const size_t slash = target.find('/', pos);
    auto segment = decodeSegment(target.substr(pos, slash - pos));
    if (!segment) return jsonReply(400, "airlock: malformed request path");
    parts.push_back(std::move(*segment));
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  if (!parts.empty() && parts.back().empty() && parts.size() > 1) parts.pop_back();  // "x/"
  auto bad = [](const std::string& what) { return jsonReply(400, "airlock: " + what); };

  if (parts.size() == 3 && parts[0] == "pypi" && parts[1] == "simple") {
    if (!plausibleProject(parts[2])) return bad("not a project name: " + inQuotes(parts[2]));
    return pypiPage(req, s, normalizePypiName(parts[2]));
  }
  if (parts.size() == 4 && parts[0] == "pypi" && parts[1] == "files") {
    if (!plausibleProject(parts[2])) return bad("not a project name: " + inQuotes(parts[2]));
    if (!plausibleDistFilename(parts[3]))
      return bad("not a distribution file name: " + inQuotes(sanitizeReasonPhrase(parts[3])));
    return pypiFile(req, s, normalizePypiName(parts[2]), parts[3]);
  }
  if (parts.size() == 5 && parts[0] == "npm" && parts[1] == "-" && parts[2] == "files") {
    const std::string& file = parts[4];
    const std::string version = file.ends_with(".tgz") ? file.substr(0, file.size() - 4) : "";
    if (!plausibleNpmName(parts[3])) return bad("not a package name: " + inQuotes(parts[3]));
    if (!plausibleNpmVersion(version)) return bad("not a tarball name: " + inQuotes(file));
    return npmTarball(req, s, parts[3], version);
  }
  if (parts.size() >= 2 && parts[0] == "npm" && parts[1] != "-") {
    // "@scope%2fname" arrives decoded as one part, "@scope/name" as two.
    std::string name = parts[1];
    if (parts.size() == 3 && name.starts_with('@'))
      name += "/" + parts[2];
    else if (parts.size() != 2)
      return jsonReply(404, kUsage);
    if (!plausibleNpmName(name)) return bad("not a package name: " + inQuotes(name));
    return npmPackument(req, s, name);
  }
  return jsonReply(404, kUsage);
}

Verdict PackageService::decide(const SandboxSession& s, Ecosystem eco, std::string_view name,
                               std::string_view version) const {
  if (!s.who.rules) {
    const std::string rule = "(no package rules for this sandbox)";
    return {false, rule,
            "package " + inQuotes(name) + " refused: no package rules for this sandbox"};
  }
  return s.who.rules->decide(eco, name, version);
}

void PackageService::audit(const SandboxSession& s, DownloadEvent event) {
  if (!audit_) return;
  event.sandbox = s.who.sandbox_id;
  event.tenant = s.who.tenant;
  audit_(event);
}

void PackageService::auditRefusedPackage(const SandboxSession& s, Ecosystem ecosystem,
                                         const std::string& package, const Verdict& whole) {
  DownloadEvent e;
  e.ecosystem = ecosystem;
  e.package = package;
  e.verdict = "denied";
  e.rule = whole.rule;
  e.reason = whole.reason;
  audit(s, std::move(e));
}

ProxyReply PackageService::refuse(const SandboxSession& s, DownloadEvent event, unsigned status,
                                  const std::string& message) {
  event.reason = message;
  audit(s, std::move(event));
  return jsonReply(status, "airlock: " + message);
}

std::variant<std::shared_ptr<const PackageService::Page>, ProxyReply> PackageService::page(
    const SandboxSession& s, const std::string& kind, const std::string& package,
    const std::string& url, const std::string& accept, bool fresh) {
  const std::string key = kind + "\n" + url + "\n" + accept;
  {
    std::lock_guard lock(mu_);
    auto it = pages_.find(key);
    if (it != pages_.end() &&
        (!fresh || Clock::now() - it->second->fetched < std::chrono::seconds(options_.page_ttl_s)))
      return it->second;
  }
  auto remember = [&](std::string body, std::string content_type, bool store) {
    auto p = std::make_shared<Page>();
    p->fetched = Clock::now();
    p->url = url;
    p->body = std::move(body);
    p->content_type = std::move(content_type);
    if (store) cache_.storePage(key, p->body + "\n" + p->content_type);
    std::lock_guard lock(mu_);
    if (pages_.size() >= kMaxRememberedPages) pages_.clear();
    pages_[key] = p;
    return std::shared_ptr<const Page>(p);
  };
  // The last copy on disk: body, then the content type on the last line.
  auto stale =
      [&](const std::string& why) -> std::variant<std::shared_ptr<const Page>, ProxyReply> {
    if (auto saved = cache_.page(key)) {
      const size_t nl = saved->rfind('\n');
      if (nl != std::string::npos) {
        auto p = std::make_shared<Page>();
        p->fetched =
            Clock::now() - std::chrono::seconds(options_.page_ttl_s);  // ask again next time
        p->url = url;
        p->content_type = saved->substr(nl + 1);
        saved->resize(nl);
        p->body = std::move(*saved);
        return std::shared_ptr<const Page>(std::move(p));
      }
    }
    return jsonReply(502, "airlock: " + why);
  };
  auto fetched = upstream_->getText(url, accept, s.stop_fd, kMaxPageBytes);
  if (!fetched) {
    if (fetched.error().kind == FetchError::Kind::stopped) return abandoned();
    return stale(fetched.error().message);
  }
  auto& [header, body] = *fetched;
  if (header.status == 404 || header.status == 410)
    return jsonReply(404, "airlock: package " + inQuotes(package) + " not found at " +
                              transfer_http::redact(url));
  if (header.status / 100 != 2)
    return stale("upstream " + inQuotes(transfer_http::redact(url)) + " answered HTTP " +
                 std::to_string(header.status));
  return remember(std::move(body), header.content_type, true);
}

std::variant<std::shared_ptr<const PackageService::PypiProject>, ProxyReply>
PackageService::pypiProject(const SandboxSession& s, const std::string& project, bool fresh) {
  const std::string url = pypi_base_ + project + "/";
  auto got = page(s, "pypi", project, url, "text/html", fresh);
  if (auto* reply = std::get_if<ProxyReply>(&got)) return std::move(*reply);
  const auto& p = std::get<std::shared_ptr<const Page>>(got);
  {
    std::lock_guard lock(mu_);
    auto it = pypi_projects_.find(project);
    if (it != pypi_projects_.end() && it->second->fetched == p->fetched) return it->second;
  }
  auto parsed = std::make_shared<PypiProject>();
  parsed->fetched = p->fetched;
  transfer_http::Url base;
  try {
    base = transfer_http::parseUrl(url);
  } catch (const std::invalid_argument& e) {
    return jsonReply(502,
                     std::string("airlock: packages: pypi_index is not a usable URL: ") + e.what());
  }
  for (IndexLink& link : parseIndexLinks(p->body)) {
    if (!plausibleDistFilename(link.filename)) continue;
    PypiFile f;
    try {
      f.url = transfer_http::resolveReference(base, link.href).withoutUserinfo();
    } catch (const std::invalid_argument&) {
      continue;  // not an http(s) link: nothing pip could use either
    }
    f.dist = classifyDistFile(project, link.filename);
    f.link = std::move(link);
    parsed->files.push_back(std::move(f));
  }
  std::lock_guard lock(mu_);
  if (pypi_projects_.size() >= kMaxRememberedPages) pypi_projects_.clear();
  pypi_projects_[project] = parsed;
  return std::shared_ptr<const PypiProject>(parsed);
}

ProxyReply PackageService::pypiPage(const ProxyRequest& req, const SandboxSession& s,
                                    const std::string& project) {
  const Verdict whole = decide(s, Ecosystem::pypi, project, "");
  auto got = pypiProject(s, project, true);
  if (auto* reply = std::get_if<ProxyReply>(&got)) return std::move(*reply);
  const auto& files = std::get<std::shared_ptr<const PypiProject>>(got)->files;
  const bool sdists = s.who.rules && s.who.rules->sdists();
  std::vector<IndexLink> kept, usable;
  for (const PypiFile& f : files) {
    if (f.dist.kind == DistKind::other) continue;
    usable.push_back(f.link);
    if (f.dist.kind == DistKind::sdist && !sdists) continue;
    if (!decide(s, Ecosystem::pypi, project, f.dist.version).allowed) continue;
    kept.push_back(f.link);
  }
  // Nothing left: list everything, so that pip picks a file and its download fails with the
  // rule's message, rather than pip's "from versions: none".
  if (kept.empty()) kept = std::move(usable);
  if (!whole.allowed) auditRefusedPackage(s, Ecosystem::pypi, project, whole);
  ProxyReply r;
  r.content_type = "text/html; charset=utf-8";
  r.body = renderIndexPage(project, kept, "http://" + req.host + "/pypi/files/" + project + "/");
  return r;
}

ProxyReply PackageService::pypiFile(const ProxyRequest& req, const SandboxSession& s,
                                    const std::string& project, const std::string& filename) {
  auto find = [&](const PypiProject& p) -> const PypiFile* {
    for (const PypiFile& f : p.files)
      if (f.link.filename == filename) return &f;
    return nullptr;
  };
  std::shared_ptr<const PypiProject> known;
  const PypiFile* file = nullptr;
  {
    std::lock_guard lock(mu_);
    if (auto it = pypi_projects_.find(project); it != pypi_projects_.end()) known = it->second;
  }
  if (known) file = find(*known);
  if (file == nullptr) {
    auto got = pypiProject(s, project, !known);
    if (auto* reply = std::get_if<ProxyReply>(&got)) return std::move(*reply);
    known = std::get<std::shared_ptr<const PypiProject>>(got);
    file = find(*known);
  }
  if (file == nullptr) {
    // A name pip never saw on a page (the proxy fetches only what upstream's index lists).
    return jsonReply(404, "airlock: " + inQuotes(filename) + " is not a file of package " +
                              inQuotes(project) + " at " + transfer_http::redact(pypi_base_));
  }
  DownloadEvent e;
  e.ecosystem = Ecosystem::pypi;
  e.package = project;
  e.version = file->dist.version;
  e.file = filename;
  e.verdict = "denied";
  const Verdict v = decide(s, Ecosystem::pypi, project, file->dist.version);
  if (!v.allowed) {
    e.rule = v.rule;
    return refuse(s, std::move(e), 403, v.reason);
  }
  if (file->dist.kind != DistKind::wheel) {
    const std::string key = s.who.rules->key() + ".sdists";
    if (file->dist.kind == DistKind::other)
      return refuse(s, std::move(e), 403, inQuotes(filename) + " is neither a wheel nor an sdist");
    if (!s.who.rules->sdists()) {
      e.rule = key;
      return refuse(s, std::move(e), 403,
                    "package " + inQuotes(project) + " " + file->dist.version + ": " +
                        inQuotes(filename) + " is a source distribution (it runs code when " +
                        "installed), refused by " + key + " = false");
    }
  }
  FileJob job;
  job.ecosystem = Ecosystem::pypi;
  job.package = project;
  job.version = file->dist.version;
  job.filename = filename;
  job.url = file->url;
  job.sha256 = file->link.sha256;
  return serveFile(req, s, job);
}

Result<RewrittenPackument> PackageService::rewriteNpm(const SandboxSession& s,
                                                      const std::string& name, const Page& p,
                                                      const std::string& host) {
  auto rewritten = rewritePackument(
      p.body, "http://" + host + "/npm/-/files/" + npmPathSegment(name) + "/",
      [&](const std::string& version) { return decide(s, Ecosystem::npm, name, version).allowed; });
  if (!rewritten) return rewritten;
  std::map<std::string, NpmTarball> tarballs;
  transfer_http::Url base;
  try {
    base = transfer_http::parseUrl(p.url);
  } catch (const std::invalid_argument& e) {
    return fail(std::string("packages: npm_registry is not a usable URL: ") + e.what());
  }
  for (NpmTarball t : rewritten->tarballs) {
    try {
      t.url = transfer_http::resolveReference(base, t.url).withoutUserinfo();
    } catch (const std::invalid_argument&) {
      continue;
    }
    tarballs[t.version] = std::move(t);
  }
  std::lock_guard lock(mu_);
  if (npm_tarballs_.size() >= kMaxRememberedPages) npm_tarballs_.clear();
  npm_tarballs_[name] = std::move(tarballs);
  return rewritten;
}

ProxyReply PackageService::npmPackument(const ProxyRequest& req, const SandboxSession& s,
                                        const std::string& name) {
  const Verdict whole = decide(s, Ecosystem::npm, name, "");
  auto got = page(s, "npm", name, npm_base_ + npmPathSegment(name), npmAccept(req.accept), true);
  if (auto* reply = std::get_if<ProxyReply>(&got)) return std::move(*reply);
  const auto& p = *std::get<std::shared_ptr<const Page>>(got);
  auto rewritten = rewriteNpm(s, name, p, req.host);
  if (!rewritten)
    return jsonReply(502, "airlock: upstream " + inQuotes(transfer_http::redact(p.url)) + ": " +
                              rewritten.error().message());
  if (!whole.allowed) auditRefusedPackage(s, Ecosystem::npm, name, whole);
  ProxyReply r;
  r.content_type = p.content_type.starts_with("application/vnd.npm.install-v1+json")
                       ? "application/vnd.npm.install-v1+json"
                       : "application/json";
  r.body = std::move(rewritten->body);
  return r;
}

ProxyReply PackageService::npmTarball(const ProxyRequest& req, const SandboxSession& s,
                                      const std::string& name, const std::string& version) {
  auto find = [&]() -> std::optional<NpmTarball> {
    std::lock_guard lock(mu_);
    auto it = npm_tarballs_.find(name);
    if (it == npm_tarballs_.end()) return std::nullopt;
    auto v = it->second.find(version);
    if (v == it->second.end()) return std::nullopt;
    return v->second;
  };
  auto tarball = find();
  if (!tarball) {
    auto got = page(s, "npm", name, npm_base_ + npmPathSegment(name),
                    "application/vnd.npm.install-v1+json", false);
    if (auto* reply = std::get_if<ProxyReply>(&got)) return std::move(*reply);
    (void)rewriteNpm(s, name, *std::get<std::shared_ptr<const Page>>(got), req.host);
    tarball = find();
  }
  const std::string filename = name.substr(name.find('/') + 1) + "-" + version + ".tgz";
  if (!tarball || tarball->url.empty())
    return jsonReply(404, "airlock: package " + inQuotes(name) + " has no version " +
                              inQuotes(version) + " at " + transfer_http::redact(npm_base_));
  DownloadEvent e;
  e.ecosystem = Ecosystem::npm;
  e.package = name;
  e.version = version;
  e.file = filename;
  e.verdict = "denied";
  const Verdict v = decide(s, Ecosystem::npm, name, version);
  if (!v.allowed) {
    e.rule = v.rule;
    return refuse(s, std::move(e), 403, v.reason);
  }
  FileJob job;
  job.ecosystem = Ecosystem::npm;
  job.package = name;
  job.version = version;
  job.filename = filename;
  job.url = tarball->url;
  job.sha512_base64 = sha512FromIntegrity(tarball->integrity);
  job.sha1_hex = lowercase(tarball->shasum);
  if (job.sha512_base64.empty() && job.sha1_hex.empty())
    return refuse(s, std::move(e), 502,
                  "package " + inQuotes(name) + " " + version +
                      ": upstream gives neither dist.integrity nor dist.shasum to verify it by");
  return serveFile(req, s, job);
}

ProxyReply PackageService::serveFile(const ProxyRequest& req, const SandboxSession& s,
                                     const FileJob& job) {
  const Rules& rules = *s.who.rules;  // decide() refused everything when there are none
  DownloadEvent e;
  e.ecosystem = job.ecosystem;
  e.package = job.package;
  e.version = job.version;
  e.file = job.filename;
  e.verdict = "failed";
  const std::string what =
      "package " + inQuotes(job.package) + " " + job.version + ": " + inQuotes(job.filename);
  const uint64_t max_file = rules.maxFileBytes();
  const uint64_t served = s.served.load();
  const uint64_t remaining =
      served >= rules.maxSandboxBytes() ? 0 : rules.maxSandboxBytes() - served;
  // `exact`: size is the file's; otherwise the download passed the limit at `size` bytes.
  auto tooLarge = [&](uint64_t size, bool exact) {
    const bool file_limit = size > max_file;
    e.rule = rules.key() + (file_limit ? ".max_file_bytes" : ".max_sandbox_bytes");
    const std::string limit = file_limit ? std::to_string(max_file)
                                         : std::to_string(rules.maxSandboxBytes()) +
                                               " (this sandbox has " + std::to_string(remaining) +
                                               " bytes left)";
    return refuse(s, e, 403,
                  what + (exact ? " is " : " is more than ") + std::to_string(size) + " bytes" +
                      ", more than " + e.rule + " = " + limit);
  };
  std::string pin_key;
  const std::vector<std::string>* pins = rules.pinsFor(job.ecosystem, job.package, &pin_key);
  auto pinRefusal = [&](const std::string& sha256) -> std::optional<ProxyReply> {
    if (pins == nullptr || std::find(pins->begin(), pins->end(), sha256) != pins->end())
      return std::nullopt;
    e.verdict = "denied";
    e.rule = pin_key;
    e.sha256 = sha256;
    return refuse(s, e, 403,
                  what + " has sha256 " + sha256 + ", which " + pin_key + " does not list");
  };
  auto deliver = [&](std::string path, uint64_t size, const std::string& sha256, bool cached) {
    if (size > max_file || (!req.head && !reserve(s.served, size, rules.maxSandboxBytes())))
      return tooLarge(size, true);
    e.verdict = "allowed";
    e.sha256 = sha256;
    e.bytes = size;
    e.cached = cached;
    e.rule = decide(s, job.ecosystem, job.package, job.version).rule;
    e.reason = "package " + inQuotes(job.package) + " " + job.version + " served" +
               (cached ? " from the cache" : "");
    audit(s, e);
    ProxyReply r;
    r.content_type = "application/octet-stream";
    r.file_path = std::move(path);
    r.file_size = size;
    return r;
  };

  // The cache: by the sha256 the index gives, else by what this URL served before.
  std::string cached_sha = job.sha256;
  if (cached_sha.empty())
    if (auto sha = cache_.blobOfUrl(job.url)) cached_sha = *sha;
  if (!job.sha256.empty())
    if (auto refused = pinRefusal(job.sha256)) return std::move(*refused);
  if (auto blob = cache_.blob(cached_sha)) {
    if (auto refused = pinRefusal(cached_sha)) return std::move(*refused);
    return deliver(blob->first, blob->second, cached_sha, true);
  }

  const uint64_t limit = std::min(max_file, remaining);
  auto incoming = cache_.incoming();
  if (!incoming) return refuse(s, e, 500, what + ": " + incoming.error().message());
  Hashes hashes;
  uint64_t bytes = 0;
  std::optional<std::string> write_error;
  bool header_said_size = false;
  auto header = upstream_->get(
      job.url, "*/*", s.stop_fd,
      [&](const UpstreamHeader& h) -> std::optional<std::string> {
        if (h.status / 100 == 2 && h.content_length && *h.content_length > limit) {
          bytes = *h.content_length;
          header_said_size = true;
          return std::string("too large");
        }
        return std::nullopt;
      },
      [&](std::string_view chunk) -> std::optional<std::string> {
        bytes += chunk.size();
        if (bytes > limit) return std::string("too large");
        hashes.update(chunk);
        if (auto w = incoming->write(chunk); !w) {
          write_error = w.error().message();
          return *write_error;
        }
        return std::nullopt;
      });
  if (!header) {
    switch (header.error().kind) {
      case FetchError::Kind::stopped:
        return abandoned();
      case FetchError::Kind::transport:
        return refuse(s, e, 502, what + ": " + header.error().message);
      case FetchError::Kind::callback:
        if (write_error) return refuse(s, e, 500, what + ": the cache: " + *write_error);
        return tooLarge(bytes, header_said_size);
    }
  }
  if (header->status == 404 || header->status == 410)
    return refuse(s, e, 404, what + " not found at " + transfer_http::redact(job.url));
  if (header->status / 100 != 2)
    return refuse(s, e, 502,
                  what + ": upstream " + inQuotes(transfer_http::redact(job.url)) +
                      " answered HTTP " + std::to_string(header->status));
  std::string sha256, sha512, sha1;
  hashes.finish(sha256, sha512, sha1);
  e.sha256 = sha256;
  auto mismatch = [&](const char* algorithm, const std::string& expected, const std::string& got) {
    return refuse(s, e, 502,
                  what + " failed verification: upstream's index gives " + algorithm + " " +
                      expected + ", the download has " + got + " (nothing was cached)");
  };
  if (!job.sha256.empty() && sha256 != job.sha256) return mismatch("sha256", job.sha256, sha256);
  if (!job.sha512_base64.empty() && sha512 != job.sha512_base64)
    return mismatch("sha512", job.sha512_base64, sha512);
  if (job.sha512_base64.empty() && !job.sha1_hex.empty() && sha1 != job.sha1_hex)
    return mismatch("sha1", job.sha1_hex, sha1);
  if (auto refused = pinRefusal(sha256)) return std::move(*refused);
  auto path = incoming->commit(sha256, job.url);
  if (!path) return refuse(s, e, 500, what + ": the cache: " + path.error().message());
  return deliver(std::move(*path), bytes, sha256, false);
}

}  // namespace airlock::packages
