#include "supervisor/images/spec.h"

#include <algorithm>
#include <array>
#include <set>
#include <span>

#include "airlock/policy/image_name.h"
#include "airlock/toml.h"
#include "airlock/whole_file.h"

namespace airlock::images {
namespace {

constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr std::array<std::string_view, 2> kTopKeys = {"name", "debian"};
constexpr std::array<std::string_view, 4> kDebianKeys = {"suite", "mirror", "variant", "packages"};
constexpr std::array<std::string_view, 6> kVariants = {"essential", "apt",       "minbase",
                                                       "required",  "important", "standard"};

std::string at(const std::string& source, const toml::source_region& where) {
  return source + ":" + std::to_string(where.begin.line) + ":" +
         std::to_string(where.begin.column) + ": ";
}

// Debian package names (policy 5.6.1), with an optional =version or :arch.
bool packageName(std::string_view p) {
  if (p.empty() || p.size() > 200 ||
      !(std::islower(static_cast<unsigned char>(p[0])) ||
        std::isdigit(static_cast<unsigned char>(p[0]))))
    return false;
  return std::all_of(p.begin(), p.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::islower(u) || std::isdigit(u) || c == '+' || c == '-' || c == '.' || c == ':' ||
           c == '=' || c == '~';
  });
}

bool suiteName(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::isalnum(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::islower(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '-';
         });
}

bool mirrorValue(std::string_view m) {
  const bool url = m.starts_with("http://") || m.starts_with("https://") || m.starts_with("file:/");
  const bool sources_file = m.starts_with("/") && (m.ends_with(".list") || m.ends_with(".sources"));
  return (url || sources_file) && m.size() < 1024 &&
         std::none_of(m.begin(), m.end(), [](char c) { return c <= ' ' || c == '\''; });
}

}  // namespace

Result<ImageSpec> parseSpec(std::string_view text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    return fail(at(source, e.source()) + std::string(e.description()));
  }
  ImageSpec spec{.source = source};
  // Unknown keys first, in file order: a misspelt key is the likeliest mistake.
  auto unknown = [&](const toml::table& t, std::span<const std::string_view> known,
                     const std::string& where) -> Result<> {
    std::vector<std::pair<toml::source_position, std::string>> bad;
    for (auto&& [k, v] : t)
      if (std::ranges::find(known, k.str()) == known.end())
        bad.push_back({k.source().begin, std::string(k.str())});
    if (bad.empty()) return {};
    auto first = std::min_element(bad.begin(), bad.end(), [](const auto& a, const auto& b) {
      return std::pair(a.first.line, a.first.column) < std::pair(b.first.line, b.first.column);
    });
    return fail(source + ":" + std::to_string(first->first.line) + ":" +
                std::to_string(first->first.column) + ": unknown key '" + first->second + "' in " +
                where);
  };
  if (auto r = unknown(doc, kTopKeys, "the image spec (known: name, [debian])"); !r)
    return Unexpected(r.error());

  auto str = [&](const toml::table& t, std::string_view key, const std::string& path,
                 std::string& out) -> Result<> {
    const toml::node* v = t.get(key);
    if (v == nullptr) return {};
    if (!v->is_string()) return fail(at(source, v->source()) + path + ": expected a string");
    out = v->as_string()->get();
    return {};
  };
  const toml::node* name = doc.get("name");
  if (name == nullptr) return fail(source + ": name: missing (the image's name in the store)");
  if (auto r = str(doc, "name", "name", spec.name); !r) return Unexpected(r.error());
  if (auto why = policy::imageNameProblem(spec.name))
    return fail(at(source, name->source()) + "name = '" + spec.name + "': " + *why);

  const toml::node* debian = doc.get("debian");
  if (debian == nullptr) return spec;
  const toml::table* d = debian->as_table();
  if (d == nullptr) return fail(at(source, debian->source()) + "debian: expected a table");
  if (auto r = unknown(*d, kDebianKeys,
                       "[debian] (known: suite, mirror, variant, packages; pip and npm packages "
                       "are not supported yet)");
      !r)
    return Unexpected(r.error());
  for (auto [key, out] : {std::pair<std::string_view, std::string*>{"suite", &spec.suite},
                          {"mirror", &spec.mirror},
                          {"variant", &spec.variant}})
    if (auto r = str(*d, key, "debian." + std::string(key), *out); !r) return Unexpected(r.error());
  if (!spec.suite.empty() && !suiteName(spec.suite))
    return fail(at(source, d->get("suite")->source()) + "debian.suite = '" + spec.suite +
                "': a suite or codename (lowercase letters, digits, '-')");
  if (!spec.mirror.empty() && !mirrorValue(spec.mirror))
    return fail(at(source, d->get("mirror")->source()) + "debian.mirror = '" + spec.mirror +
                "': an http(s):// or file:/ URL, or an absolute path to a .list or .sources "
                "file");
  if (std::ranges::find(kVariants, spec.variant) == kVariants.end())
    return fail(at(source, d->get("variant")->source()) + "debian.variant = '" + spec.variant +
                "': one of essential, apt, minbase, required, important, standard");
  if (const toml::node* p = d->get("packages")) {
    const toml::array* arr = p->as_array();
    if (arr == nullptr)
      return fail(at(source, p->source()) + "debian.packages: expected an array of strings");
    std::set<std::string> seen;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node* el = arr->get(i);
      const std::string key = "debian.packages[" + std::to_string(i) + "]";
      if (!el->is_string()) return fail(at(source, el->source()) + key + ": expected a string");
      std::string pkg = el->as_string()->get();
      if (!packageName(pkg))
        return fail(at(source, el->source()) + key + " = '" + pkg +
                    "': a Debian package name (lowercase letters, digits, + - . and an optional "
                    "=version or :arch)");
      if (!seen.insert(pkg).second)
        return fail(at(source, el->source()) + key + " = '" + pkg + "': listed twice");
      spec.packages.push_back(std::move(pkg));
    }
  }
  return spec;
}

Result<ImageSpec> loadSpec(const std::string& path) {
  AIRLOCK_TRY_CTX(text, readWholeFile(path, kMaxSpecBytes), "image spec");
  return parseSpec(text, path);
}

std::string canonicalSpec(const ImageSpec& spec) {
  std::vector<std::string> packages = spec.packages;
  std::sort(packages.begin(), packages.end());
  std::string out = "airlock-image-spec-v1\nsuite " + spec.suite + "\nmirror " + spec.mirror +
                    "\nvariant " + spec.variant + "\n";
  for (const auto& p : packages) out += "package " + p + "\n";
  return out;
}

}  // namespace airlock::images
