// Policy files: TOML (toml++) → Policy. Phases, each reporting its first error in file order:
// syntax, schema version, structure (unknown keys, types, ranges), references (extends,
// default_profile), then the checks of every resolved profile, [server] and [tenants.*].
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>
#include <type_traits>

#include "airlock/policy/installed.h"
#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "airlock/toml.h"
#include "airlock/unique_fd.h"
#include "check.h"
#include "schema.h"

namespace airlock::policy {
namespace {

using detail::Field;

constexpr size_t kMaxFileBytes = 4 << 20;  // far above any real policy; refuses /dev/zero

// Where each dotted key's value came from: "limits.memory_mb", "env.HOME", "languages[1]".
using Where = std::map<std::string, toml::source_region>;

struct Diag {
  toml::source_position at;
  std::string message;
};

// Errors of one phase; the one earliest in the file wins.
class Diags {
 public:
  explicit Diags(std::string source, bool positions = true)
      : source_(std::move(source)), positions_(positions) {}

  void add(const toml::source_region& where, std::string message) {
    add(where.begin, std::move(message));
  }
  void add(toml::source_position at, std::string message) {
    diags_.push_back({at, std::move(message)});
  }
  bool empty() const { return diags_.empty(); }

  Unexpected first() const {
    auto it = std::min_element(diags_.begin(), diags_.end(), [](const Diag& a, const Diag& b) {
      return std::pair(a.at.line, a.at.column) < std::pair(b.at.line, b.at.column);
    });
    return fail(format(it->at, it->message));
  }

  std::string format(toml::source_position at, const std::string& message) const {
    if (!positions_ || at.line == 0) return source_ + ": " + message;
    return source_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " +
           message;
  }

 private:
  std::string source_;
  bool positions_;
  std::vector<Diag> diags_;
};

std::string typeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

void typeError(Diags& diags, const toml::node& node, const std::string& prefix,
               const std::string& path, std::string_view expected) {
  diags.add(node.source(), prefix + path + ": expected " + std::string(expected) + ", got " +
                               typeName(node.type()));
}

std::string joinNames(const auto& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string listOrNone(const std::vector<std::string>& names) {
  return names.empty() ? std::string("none") : joinNames(names);
}

template <typename Int>
void readInteger(const toml::node& node, Int* target, const std::string& prefix,
                 const std::string& path, Diags& diags) {
  const auto* v = node.as_integer();
  if (v == nullptr) return typeError(diags, node, prefix, path, "an integer");
  int64_t x = v->get();
  if (x < 0) {
    return diags.add(node.source(),
                     prefix + path + " = " + std::to_string(x) + ": must not be negative");
  }
  constexpr uint64_t kMax =
      std::min<uint64_t>(std::numeric_limits<Int>::max(), std::numeric_limits<int64_t>::max());
  if (static_cast<uint64_t>(x) > kMax) {
    return diags.add(node.source(), prefix + path + " = " + std::to_string(x) +
                                        ": too large (at most " + std::to_string(kMax) + ")");
  }
  *target = static_cast<Int>(x);
}

std::string didYouMean(std::string_view suggestion) {
  if (suggestion.empty()) return {};
  return " (did you mean '" + std::string(suggestion) + "'?)";
}

// One table of an array of tables ([[...rules]], [[...plugins]]): every key known, each value
// of its type; locations under "<path>[i].<key>".
class ItemReader {
 public:
  ItemReader(const toml::node& node, const std::string& prefix, std::string path, Where& where,
             const std::string& where_prefix, Diags& diags)
      : prefix_(prefix),
        path_(std::move(path)),
        where_(where),
        where_prefix_(where_prefix),
        diags_(diags),
        table_(node.as_table()) {
    if (table_ == nullptr) typeError(diags, node, prefix, path_, "a table");
  }
  bool ok() const { return table_ != nullptr; }

  // Reports keys that are not in `known` as unknown in `header`.
  void rejectUnknown(std::span<const std::string_view> known, const std::string& header) {
    for (auto&& [k, v] : *table_) {
      if (std::ranges::find(known, k.str()) != known.end()) continue;
      diags_.add(k.source(), "unknown key '" + std::string(k.str()) + "' in " + header +
                                 didYouMean(detail::closest(k.str(), known)));
    }
  }
  void string(std::string_view key, std::string& out, bool required) {
    const toml::node* v = table_->get(key);
    const std::string path = path_ + "." + std::string(key);
    if (v == nullptr) {
      if (required) {
        diags_.add(table_->source(),
                   prefix_ + path + ": missing (every entry needs '" + std::string(key) + "')");
      }
      return;
    }
    where_[where_prefix_ + path] = v->source();
    if (const auto* s = v->as_string()) {
      out = s->get();
    } else {
      typeError(diags_, *v, prefix_, path, "a string");
    }
  }
  void strings(std::string_view key, std::vector<std::string>& out) {
    const toml::node* v = table_->get(key);
    if (v == nullptr) return;
    const std::string path = path_ + "." + std::string(key);
    where_[where_prefix_ + path] = v->source();
    const auto* arr = v->as_array();
    if (arr == nullptr) return typeError(diags_, *v, prefix_, path, "an array of strings");
    out.clear();
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* s = arr->get(i)->as_string();
      if (s == nullptr) {
        return typeError(diags_, *arr->get(i), prefix_, path + "[" + std::to_string(i) + "]",
                         "a string");
      }
      out.push_back(s->get());
    }
  }
  // A value kept as JSON text: a table (or inline table) is converted; a string is taken as is.
  void json(std::string_view key, std::string& out) {
    const toml::node* v = table_->get(key);
    if (v == nullptr) return;
    const std::string path = path_ + "." + std::string(key);
    where_[where_prefix_ + path] = v->source();
    if (const auto* s = v->as_string()) {
      out = s->get();
    } else if (const auto* t = v->as_table()) {
      std::ostringstream json;
      json << toml::json_formatter(*t, toml::format_flags::none);
      // One line, as plugins and `airlock policy explain` show it.
      out = nlohmann::json::parse(json.str()).dump();
    } else {
      typeError(diags_, *v, prefix_, path, "a table");
    }
  }

 private:
  const std::string& prefix_;
  std::string path_;
  Where& where_;
  const std::string& where_prefix_;
  Diags& diags_;
  const toml::table* table_;
};

template <typename Item, typename ReadItem>
void readItems(const toml::node& node, std::vector<Item>* target, const std::string& prefix,
               const std::string& path, Where& where, const std::string& where_prefix, Diags& diags,
               ReadItem read_item) {
  const auto* arr = node.as_array();
  if (arr == nullptr) return typeError(diags, node, prefix, path, "an array of tables");
  std::vector<Item> items;
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    where[where_prefix + item_path] = arr->get(i)->source();
    ItemReader reader(*arr->get(i), prefix, item_path, where, where_prefix, diags);
    if (!reader.ok()) return;
    Item item;
    read_item(reader, item);
    items.push_back(std::move(item));
  }
  *target = std::move(items);
}

constexpr std::string_view kRuleKeys[] = {"id", "pattern", "action", "reason", "languages"};
constexpr std::string_view kPluginKeys[] = {"name", "config"};

// Writes one key's value into a profile, server or tenant: type and range checked, location
// recorded under where_prefix + the key's path. Lists replace what the struct had; env adds to
// it (so `extends` merges env).
template <typename S>
void applyField(const detail::FieldOf<S>& field, const toml::node& node, S& object, Where& where,
                const std::string& prefix, Diags& diags, const std::string& where_prefix = "") {
  const std::string path = field.path();
  std::visit(
      [&](auto get) {
        using T = std::remove_pointer_t<decltype(get(object))>;
        T* target = get(object);
        if constexpr (std::is_same_v<T, std::string>) {
          const auto* s = node.as_string();
          if (s == nullptr) return typeError(diags, node, prefix, path, "a string");
          *target = s->get();
        } else if constexpr (std::is_same_v<T, bool>) {
          const auto* b = node.as_boolean();
          if (b == nullptr) return typeError(diags, node, prefix, path, "true or false");
          *target = b->get();
        } else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
          readInteger(node, target, prefix, path, diags);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          const auto* arr = node.as_array();
          if (arr == nullptr) return typeError(diags, node, prefix, path, "an array of strings");
          std::vector<std::string> values;
          for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& el = *arr->get(i);
            std::string el_path = path + "[" + std::to_string(i) + "]";
            const auto* s = el.as_string();
            if (s == nullptr) return typeError(diags, el, prefix, el_path, "a string");
            values.push_back(s->get());
            where[where_prefix + el_path] = el.source();
          }
          *target = std::move(values);
        } else if constexpr (std::is_same_v<T, std::vector<ReviewRule>>) {
          readItems(node, target, prefix, path, where, where_prefix, diags,
                    [&](ItemReader& r, ReviewRule& rule) {
                      r.rejectUnknown(kRuleKeys, "a review.patterns.rules entry");
                      r.string("id", rule.id, true);
                      r.string("pattern", rule.pattern, true);
                      r.string("action", rule.action, false);
                      r.string("reason", rule.reason, false);
                      r.strings("languages", rule.languages);
                    });
        } else if constexpr (std::is_same_v<T, std::vector<ReviewPlugin>>) {
          readItems(node, target, prefix, path, where, where_prefix, diags,
                    [&](ItemReader& r, ReviewPlugin& plugin) {
                      r.rejectUnknown(kPluginKeys, "a review.plugins entry");
                      r.string("name", plugin.name, true);
                      r.json("config", plugin.config);
                    });
        } else {
          static_assert(std::is_same_v<T, std::map<std::string, std::string>>);
          const auto* tbl = node.as_table();
          if (tbl == nullptr) return typeError(diags, node, prefix, path, "a table of strings");
          for (auto&& [k, v] : *tbl) {
            std::string el_path = path + "." + std::string(k.str());
            const auto* s = v.as_string();
            if (s == nullptr) {
              typeError(diags, v, prefix, el_path, "a string");
              continue;
            }
            (*target)[std::string(k.str())] = s->get();
            where[where_prefix + el_path] = k.source();
          }
        }
      },
      field.ref);
  where[where_prefix + path] = node.source();
}

// "did you mean" for an unknown key directly in [profiles.<name>]: a sibling key, or a key of a
// sub-table written one level too high ("memory_mb" → "limits.memory_mb").
std::string suggestProfileKey(std::string_view key) {
  std::vector<std::string_view> here;
  for (const Field& f : detail::fields()) {
    if (f.table.empty()) here.push_back(f.key);
  }
  for (std::string_view t : detail::subTables()) here.push_back(t);
  here.push_back(detail::kReviewTable);
  here.push_back(detail::kTransferTable);
  here.push_back(detail::kExtendsKey);
  if (auto s = detail::closest(key, here); !s.empty()) return didYouMean(s);
  std::vector<std::string_view> nested_keys;
  for (const Field& f : detail::fields()) {
    if (!f.table.empty()) nested_keys.push_back(f.key);
  }
  if (auto s = detail::closest(key, nested_keys); !s.empty()) {
    for (const Field& f : detail::fields()) {
      if (!f.table.empty() && f.key == s) return didYouMean(f.path());
    }
  }
  return {};
}

struct Extends {
  std::optional<std::string> name;
  toml::source_region where;
};

// Reads a profile table with keys of its own and nested tables ([profiles.<name>.review] with one
// per reviewer, [profiles.<name>.transfer] with one per plugin). `table` is "review" or
// "transfer"; `nested_tables` lists it and its nested tables' dotted names.
void readNested(const toml::node& node, std::string_view table,
                std::span<const std::string_view> nested_tables, Profile& profile, Where& where,
                const std::string& prefix, const std::string& header, Diags& diags) {
  const auto* outer = node.as_table();
  if (outer == nullptr) return typeError(diags, node, prefix, std::string(table), "a table");
  where[std::string(table)] = node.source();
  for (auto&& [k, v] : *outer) {
    const std::string_view key = k.str();
    if (const Field* f = detail::findField(table, key)) {
      applyField(*f, v, profile, where, prefix, diags);
      continue;
    }
    const std::string nested = std::string(table) + "." + std::string(key);
    if (std::ranges::find(nested_tables, nested) != nested_tables.end()) {
      const auto* sub = v.as_table();
      if (sub == nullptr) {
        typeError(diags, v, prefix, nested, "a table");
        continue;
      }
      where[nested] = v.source();
      for (auto&& [k2, v2] : *sub) {
        if (const Field* f = detail::findField(nested, k2.str())) {
          applyField(*f, v2, profile, where, prefix, diags);
          continue;
        }
        std::vector<std::string_view> candidates;
        for (const Field& f2 : detail::fields()) {
          if (f2.table == nested) candidates.push_back(f2.key);
        }
        diags.add(k2.source(), "unknown key '" + std::string(k2.str()) + "' in " + header + "." +
                                   nested + "]" +
                                   didYouMean(detail::closest(k2.str(), candidates)));
      }
      continue;
    }
    std::vector<std::string_view> candidates;
    for (const Field& f : detail::fields()) {
      if (f.table == table) candidates.push_back(f.key);
    }
    for (std::string_view t : nested_tables) {
      if (t.size() > table.size()) candidates.push_back(t.substr(table.size() + 1));
    }
    diags.add(k.source(), "unknown key '" + std::string(key) + "' in " + header + "." +
                              std::string(table) + "]" +
                              didYouMean(detail::closest(key, candidates)));
  }
}

// Reads one [profiles.<name>] table onto `profile`, which holds the defaults or the base profile.
void readProfile(const std::string& name, const toml::table& table, Profile& profile, Where& where,
                 Extends& extends, Diags& diags) {
  const std::string prefix = "profile '" + name + "': ";
  const std::string header = "[profiles." + name;
  for (auto&& [k, v] : table) {
    const std::string_view key = k.str();
    if (key == detail::kExtendsKey) {
      const auto* s = v.as_string();
      if (s == nullptr) {
        typeError(diags, v, prefix, "extends", "a profile name");
        continue;
      }
      extends.name = s->get();
      extends.where = v.source();
      continue;
    }
    if (key == detail::kReviewTable) {
      readNested(v, key, detail::reviewTables(), profile, where, prefix, header, diags);
      continue;
    }
    if (key == detail::kTransferTable) {
      readNested(v, key, detail::transferTables(), profile, where, prefix, header, diags);
      continue;
    }
    if (std::ranges::find(detail::subTables(), key) != detail::subTables().end()) {
      const auto* sub = v.as_table();
      if (sub == nullptr) {
        typeError(diags, v, prefix, std::string(key), "a table");
        continue;
      }
      for (auto&& [k2, v2] : *sub) {
        if (const Field* f = detail::findField(key, k2.str())) {
          applyField(*f, v2, profile, where, prefix, diags);
          continue;
        }
        std::vector<std::string_view> candidates;
        for (const Field& f2 : detail::fields()) {
          if (f2.table == key) candidates.push_back(f2.key);
        }
        std::string hint = didYouMean(detail::closest(k2.str(), candidates));
        for (const Field& f2 : detail::fields()) {
          // A key of a sibling table: "pool_size" written in [profiles.x.limits].
          if (hint.empty() && f2.key == k2.str()) {
            hint = " (it belongs in " + header +
                   (f2.table.empty() ? "" : "." + std::string(f2.table)) + "])";
          }
        }
        diags.add(k2.source(), "unknown key '" + std::string(k2.str()) + "' in " + header + "." +
                                   std::string(key) + "]" + hint);
      }
      continue;
    }
    if (const Field* f = detail::findField("", key)) {
      applyField(*f, v, profile, where, prefix, diags);
      continue;
    }
    diags.add(k.source(),
              "unknown key '" + std::string(key) + "' in " + header + "]" + suggestProfileKey(key));
  }
}

bool validProfileName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

struct RawProfile {
  const toml::table* table = nullptr;
  toml::source_region where;  // the profile's name in [profiles.<name>]
  Extends extends;
};

struct Resolved {
  Profile profile;
  Where where;  // every key's location, inherited ones included
  Where own;    // only the keys this profile's table sets
};

// Follows `extends` chains without recursion; every profile is read onto a copy of its base.
std::map<std::string, Resolved> resolveProfiles(const std::map<std::string, RawProfile>& raws,
                                                Diags& diags) {
  std::vector<std::string> names;
  for (const auto& [n, raw] : raws) names.push_back(n);
  std::map<std::string, Resolved> resolved;
  std::set<std::string> failed;
  for (const auto& [start, unused] : raws) {
    if (resolved.contains(start) || failed.contains(start)) continue;
    std::vector<std::string> chain = {start};
    Resolved base{Profile{}, {}};
    bool ok = true;
    for (;;) {
      const RawProfile& raw = raws.at(chain.back());
      if (!raw.extends.name) break;
      const std::string& target = *raw.extends.name;
      const std::string prefix = "profile '" + chain.back() + "': ";
      if (!raws.contains(target)) {
        std::vector<std::string_view> candidates(names.begin(), names.end());
        std::string_view guess = detail::closest(target, candidates);
        diags.add(raw.extends.where,
                  prefix + "extends unknown profile '" + target + "'" +
                      (guess.empty() ? " (this policy has: " + joinNames(names) + ")"
                                     : didYouMean(guess)));
        ok = false;
        break;
      }
      if (auto it = resolved.find(target); it != resolved.end()) {
        base = it->second;
        break;
      }
      if (failed.contains(target)) {
        ok = false;
        break;
      }
      if (auto at = std::ranges::find(chain, target); at != chain.end()) {
        std::string cycle;
        for (auto i = at; i != chain.end(); ++i) cycle += *i + " -> ";
        diags.add(raw.extends.where,
                  prefix + "extends '" + target + "' makes a cycle: " + cycle + target);
        ok = false;
        break;
      }
      chain.push_back(target);
    }
    if (!ok) {
      failed.insert(chain.begin(), chain.end());
      continue;
    }
    for (auto name = chain.rbegin(); name != chain.rend(); ++name) {
      Resolved r = base;
      Extends ignored;
      r.profile.name = *name;
      r.where["*"] = raws.at(*name).where;
      r.own.clear();
      readProfile(*name, *raws.at(*name).table, r.profile, r.own, ignored, diags);
      for (const auto& [key, at] : r.own) r.where[key] = at;
      base = r;
      resolved.emplace(*name, std::move(r));
    }
  }
  return resolved;
}

// The location of a dotted key; else of `other_key` (the second key of a cross-field rule, when
// only that one was written); else of the nearest enclosing key that has one.
toml::source_region locate(const Where& where, std::string key, const std::string& other_key = "") {
  if (!other_key.empty() && !where.contains(key)) {
    if (auto it = where.find(other_key); it != where.end()) return it->second;
  }
  for (;;) {
    if (auto it = where.find(key); it != where.end()) return it->second;
    size_t cut = key.find_last_of(".[");
    if (cut == std::string::npos) break;
    key.resize(cut);
  }
  if (auto it = where.find("*"); it != where.end()) return it->second;
  return {};
}

template <typename S>
void readFields(const toml::table& table, std::span<const detail::FieldOf<S>> fields, S& object,
                const std::string& header, const std::string& prefix,
                const std::string& where_prefix, Where& where, Diags& diags) {
  for (auto&& [k, v] : table) {
    if (const auto* f = detail::findIn(fields, k.str())) {
      applyField(*f, v, object, where, prefix, diags, where_prefix);
      continue;
    }
    std::vector<std::string_view> candidates;
    for (const auto& f : fields) candidates.push_back(f.key);
    diags.add(k.source(), "unknown key '" + std::string(k.str()) + "' in " + header +
                              didYouMean(detail::closest(k.str(), candidates)));
  }
}

// [tenants.<name>] tables onto policy.tenants; locations under "tenants.<name>...".
void readTenants(const toml::table& tenants, Policy& policy, Where& where, Diags& diags) {
  for (auto&& [name_key, body] : tenants) {
    const std::string name(name_key.str());
    if (!validProfileName(name)) {
      diags.add(name_key.source(), "tenant name '" + name +
                                       "' is not allowed: use up to 64 letters, digits, '-' "
                                       "and '_'");
      continue;
    }
    const auto* table = body.as_table();
    if (table == nullptr) {
      typeError(diags, body, "", "tenants." + name, "a table");
      continue;
    }
    Tenant tenant;
    tenant.name = name;
    where["tenants." + name] = name_key.source();
    readFields(*table, detail::tenantFields(), tenant, "[tenants." + name + "]",
               "tenant '" + name + "': ", "tenants." + name + ".", where, diags);
    policy.tenants.emplace(name, std::move(tenant));
  }
}

Result<Policy> parseTable(const toml::table& doc, std::string_view text,
                          const std::string& source_name, const Installed* installed) {
  Diags diags(source_name);

  // Schema first: a file from a newer airlock gets one clear message, not a list of unknowns.
  const toml::node* schema = doc.get("schema");
  if (schema == nullptr) {
    diags.add(toml::source_position{1, 1}, "missing key 'schema'; start the file with 'schema = " +
                                               std::to_string(kSchemaVersion) + "'");
    return diags.first();
  }
  if (!schema->is_integer()) {
    typeError(diags, *schema, "", "schema", "an integer");
    return diags.first();
  }
  if (int64_t v = schema->as_integer()->get(); v != kSchemaVersion) {
    diags.add(schema->source(), "schema = " + std::to_string(v) +
                                    " is not supported; this airlock reads schema = " +
                                    std::to_string(kSchemaVersion));
    return diags.first();
  }

  Policy policy;
  policy.source = source_name;
  policy.hash = sha256Hex(text);
  std::optional<toml::source_region> default_where;
  std::map<std::string, RawProfile> raws;
  Where top_where;  // [server] and [tenants.*] keys, dotted from the top: "server.tcp"

  for (auto&& [k, v] : doc) {
    const std::string_view key = k.str();
    if (key == "schema") continue;
    if (key == "default_profile") {
      if (const auto* s = v.as_string()) {
        policy.default_profile = s->get();
        default_where = v.source();
      } else {
        typeError(diags, v, "", "default_profile", "a profile name");
      }
      continue;
    }
    if (key == "profiles") {
      const auto* profiles = v.as_table();
      if (profiles == nullptr) {
        typeError(diags, v, "", "profiles", "a table of [profiles.<name>] tables");
        continue;
      }
      for (auto&& [name_key, body] : *profiles) {
        const std::string name(name_key.str());
        if (!validProfileName(name)) {
          diags.add(name_key.source(), "profile name '" + name +
                                           "' is not allowed: use up to 64 letters, digits, "
                                           "'-' and '_'");
          continue;
        }
        const auto* table = body.as_table();
        if (table == nullptr) {
          typeError(diags, body, "", "profiles." + name, "a table");
          continue;
        }
        RawProfile raw{table, name_key.source(), {}};
        Profile scratch;
        Where scratch_where;
        readProfile(name, *table, scratch, scratch_where, raw.extends, diags);
        raws.emplace(name, std::move(raw));
      }
      continue;
    }
    if (key == "server") {
      const auto* table = v.as_table();
      if (table == nullptr) {
        typeError(diags, v, "", "server", "a table ([server])");
        continue;
      }
      top_where["server"] = v.source();
      readFields(*table, detail::serverFields(), policy.server, "[server]", "server.", "server.",
                 top_where, diags);
      continue;
    }
    if (key == "audit") {
      const auto* table = v.as_table();
      if (table == nullptr) {
        typeError(diags, v, "", "audit", "a table ([audit])");
        continue;
      }
      top_where["audit"] = v.source();
      readFields(*table, detail::auditFields(), policy.audit, "[audit]", "audit.", "audit.",
                 top_where, diags);
      continue;
    }
    if (key == "egress") {
      const auto* table = v.as_table();
      if (table == nullptr) {
        typeError(diags, v, "", "egress", "a table ([egress])");
        continue;
      }
      top_where["egress"] = v.source();
      readFields(*table, detail::egressFields(), policy.egress, "[egress]", "egress.", "egress.",
                 top_where, diags);
      continue;
    }
    if (key == "transfer") {
      const auto* table = v.as_table();
      if (table == nullptr) {
        typeError(diags, v, "", "transfer", "a table ([transfer])");
        continue;
      }
      top_where["transfer"] = v.source();
      readFields(*table, detail::transferFields(), policy.transfer, "[transfer]", "transfer.",
                 "transfer.", top_where, diags);
      continue;
    }
    if (key == "packages") {
      const auto* table = v.as_table();
      if (table == nullptr) {
        typeError(diags, v, "", "packages", "a table ([packages])");
        continue;
      }
      top_where["packages"] = v.source();
      readFields(*table, detail::packagesFields(), policy.packages, "[packages]", "packages.",
                 "packages.", top_where, diags);
      continue;
    }
    if (key == "tenants") {
      const auto* tenants = v.as_table();
      if (tenants == nullptr) {
        typeError(diags, v, "", "tenants", "a table of [tenants.<name>] tables");
        continue;
      }
      readTenants(*tenants, policy, top_where, diags);
      continue;
    }
    std::string hint;
    if (detail::findField("", key) != nullptr || key == detail::kExtendsKey ||
        std::ranges::find(detail::subTables(), key) != detail::subTables().end()) {
      hint = " (profile settings go under [profiles.<name>], e.g. [profiles.default])";
    } else if (detail::findIn(detail::serverFields(), key) != nullptr) {
      hint = " (server settings go under [server])";
    } else {
      hint = didYouMean(detail::closest(key, detail::kTopLevelKeys));
    }
    diags.add(k.source(), "unknown key '" + std::string(key) + "' at the top level" + hint);
  }
  if (!diags.empty()) return diags.first();

  std::map<std::string, Resolved> resolved = resolveProfiles(raws, diags);
  if (raws.empty()) {
    Profile builtin;
    builtin.name = "default";
    resolved.emplace("default", Resolved{builtin, {}});
  }
  if (!resolved.contains(policy.default_profile) && !raws.contains(policy.default_profile)) {
    std::vector<std::string> names;
    for (const auto& [n, raw] : raws) names.push_back(n);
    if (default_where) {
      diags.add(*default_where, "default_profile = '" + policy.default_profile +
                                    "' names no profile (this policy has: " + listOrNone(names) +
                                    ")");
    } else {
      diags.add(
          toml::source_position{1, 1},
          "no [profiles.default]: add it, or set default_profile to one of: " + listOrNone(names));
    }
  }
  if (!diags.empty()) return diags.first();

  if (!policy.tenants.contains(std::string(kDefaultTenant))) {
    Tenant tenant;
    tenant.name = kDefaultTenant;
    policy.tenants.emplace(tenant.name, std::move(tenant));
  }

  for (auto& [name, r] : resolved) {
    if (auto problem = detail::check(r.profile)) {
      // A cross-field rule broken by a key this profile sets points there, not at the base.
      const Where& where =
          !r.own.contains(problem->key) && r.own.contains(problem->other_key) ? r.own : r.where;
      diags.add(locate(where, problem->key, problem->other_key),
                detail::profilePrefix(r.profile) + problem->message);
    } else if (auto missing = installed != nullptr ? detail::checkInstalled(r.profile, *installed)
                                                   : std::nullopt) {
      // A name this profile inherits points at the base that wrote it.
      diags.add(locate(r.where, missing->key), detail::profilePrefix(r.profile) + missing->message);
    }
    policy.profiles.emplace(name, r.profile);
  }
  // Rules of the server, the tenants and across sections; keys are dotted from the top, and
  // "profiles.<name>.<key>" is found in that profile's own locations.
  for (const detail::Problem& problem : detail::checkPolicy(policy)) {
    toml::source_region at;
    if (problem.key.starts_with("profiles.")) {
      const std::string rest = problem.key.substr(9);
      const size_t dot = rest.find('.');
      if (auto it = resolved.find(rest.substr(0, dot)); it != resolved.end()) {
        at = locate(it->second.where, dot == std::string::npos ? "" : rest.substr(dot + 1));
      }
    } else {
      at = locate(top_where, problem.key, problem.other_key);
    }
    diags.add(at, problem.message);
  }
  if (!diags.empty()) return diags.first();
  return policy;
}

std::string quoteToml(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789ABCDEF";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string tomlKey(std::string_view k) {
  bool bare = !k.empty() && std::ranges::all_of(k, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
  return bare ? std::string(k) : quoteToml(k);
}

Result<Policy> parseChecking(std::string_view toml_text, const std::string& source_name,
                             const Installed* installed) {
  try {
    toml::table doc = toml::parse(toml_text, std::string_view(source_name));
    return parseTable(doc, toml_text, source_name, installed);
  } catch (const toml::parse_error& e) {
    Diags diags(source_name);
    diags.add(e.source(), "invalid TOML: " + std::string(e.description()));
    return diags.first();
  } catch (const std::exception& e) {
    return fail(source_name + ": cannot read policy: " + e.what());
  }
}

Result<Policy> loadFileChecking(const std::string& path, const Installed* installed) {
  // O_NONBLOCK: a FIFO given as the policy must be refused below, not block open().
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return sysError("open policy file", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sysError("fstat policy file", path);
  if (!S_ISREG(st.st_mode)) return fail("policy file is not a regular file", path);
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("read policy file", path);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) {
      return fail("policy file is larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB",
                  path);
    }
  }
  return parseChecking(text, path, installed);
}

}  // namespace

Result<Policy> parse(std::string_view toml_text, const std::string& source_name) {
  return parseChecking(toml_text, source_name, nullptr);
}

Result<Policy> loadFile(const std::string& path) { return loadFileChecking(path, nullptr); }

Result<Policy> loadFileCheckingInstalled(const std::string& path, const Installed& installed) {
  return loadFileChecking(path, &installed);
}

namespace {

std::string tomlStrings(const std::vector<std::string>& values) {
  std::string items;
  for (const auto& s : values) items += (items.empty() ? "" : ", ") + quoteToml(s);
  return "[" + items + "]";
}

// One TOML table per struct: plain keys under `header`, then each sub-table, env-like maps as
// their own tables.
template <typename S>
std::string tableToToml(S copy, std::span<const detail::FieldOf<S>> fields,
                        const std::string& header) {
  std::string plain, maps, sub;
  std::string_view current_table;
  for (const auto& f : fields) {
    std::string* out = f.table.empty() ? &plain : &sub;
    if (!f.table.empty() && f.table != current_table) {
      current_table = f.table;
      sub += "\n[" + header + "." + std::string(f.table) + "]\n";
    }
    std::visit(
        [&](auto get) {
          using T = std::remove_pointer_t<decltype(get(copy))>;
          const T& v = *get(copy);
          if constexpr (std::is_same_v<T, std::string>) {
            *out += std::string(f.key) + " = " + quoteToml(v) + "\n";
          } else if constexpr (std::is_same_v<T, bool>) {
            *out += std::string(f.key) + " = " + (v ? "true" : "false") + "\n";
          } else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
            *out += std::string(f.key) + " = " + std::to_string(v) + "\n";
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            *out += std::string(f.key) + " = " + tomlStrings(v) + "\n";
          } else if constexpr (std::is_same_v<T, std::vector<ReviewRule>>) {
            std::string items;
            for (const ReviewRule& r : v) {
              items += (items.empty() ? "" : ", ") + std::string("{id = ") + quoteToml(r.id) +
                       ", pattern = " + quoteToml(r.pattern) + ", action = " + quoteToml(r.action) +
                       ", reason = " + quoteToml(r.reason) +
                       ", languages = " + tomlStrings(r.languages) + "}";
            }
            *out += std::string(f.key) + " = [" + items + "]\n";
          } else if constexpr (std::is_same_v<T, std::vector<ReviewPlugin>>) {
            std::string items;
            for (const ReviewPlugin& p : v) {
              items += (items.empty() ? "" : ", ") + std::string("{name = ") + quoteToml(p.name) +
                       ", config = " + quoteToml(p.config) + "}";
            }
            *out += std::string(f.key) + " = [" + items + "]\n";
          } else if (!f.table.empty()) {
            // A map inside a sub-table (packages.pins) is written inline, in its table.
            std::string items;
            for (const auto& [k, val] : v)
              items += (items.empty() ? "" : ", ") + tomlKey(k) + " = " + quoteToml(val);
            *out += std::string(f.key) + " = {" + (items.empty() ? "" : " " + items + " ") + "}\n";
          } else {
            maps += "\n[" + header + "." + std::string(f.key) + "]\n";
            for (const auto& [k, val] : v) maps += tomlKey(k) + " = " + quoteToml(val) + "\n";
          }
        },
        f.ref);
  }
  return "[" + header + "]\n" + plain + maps + sub;
}

template <typename S>
std::vector<std::string> keysOf(std::span<const detail::FieldOf<S>> fields) {
  std::vector<std::string> keys;
  for (const auto& f : fields) keys.push_back(f.path());
  return keys;
}

}  // namespace

std::string profileToToml(const Profile& profile) {
  return tableToToml(profile, detail::fields(),
                     "profiles." + tomlKey(profile.name.empty() ? "default" : profile.name));
}

std::string serverToToml(const Server& server) {
  return tableToToml(server, detail::serverFields(), "server");
}

std::string tenantToToml(const Tenant& tenant) {
  return tableToToml(tenant, detail::tenantFields(),
                     "tenants." + tomlKey(tenant.name.empty() ? "default" : tenant.name));
}

std::vector<std::string> serverKeys() { return keysOf(detail::serverFields()); }

std::string auditSettingsToToml(const AuditSettings& audit) {
  return tableToToml(audit, detail::auditFields(), "audit");
}

std::vector<std::string> auditKeys() { return keysOf(detail::auditFields()); }

std::string egressSettingsToToml(const EgressSettings& egress) {
  return tableToToml(egress, detail::egressFields(), "egress");
}

std::vector<std::string> egressKeys() { return keysOf(detail::egressFields()); }

std::string packageSettingsToToml(const PackageSettings& packages) {
  return tableToToml(packages, detail::packagesFields(), "packages");
}

std::vector<std::string> packageSettingsKeys() { return keysOf(detail::packagesFields()); }

std::string transferSettingsToToml(const TransferSettings& transfer) {
  return tableToToml(transfer, detail::transferFields(), "transfer");
}

std::vector<std::string> transferKeys() { return keysOf(detail::transferFields()); }

std::vector<std::string> tenantKeys() { return keysOf(detail::tenantFields()); }

Result<> applyOverride(Profile& profile, std::string_view assignment) {
  const std::string what = "override '" + std::string(assignment) + "'";
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return fail(what + ": expected KEY=VALUE");
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  std::string_view key = trim(assignment.substr(0, eq));
  std::string_view value = trim(assignment.substr(eq + 1));

  std::string table, name;
  // The key is the last component: "review.limits.max_bytes" is max_bytes of review.limits.
  if (key.starts_with("env.")) {
    table = "env";
    name = key.substr(4);
  } else if (size_t dot = key.rfind('.'); dot != std::string_view::npos) {
    table = key.substr(0, dot);
    name = key.substr(dot + 1);
  } else {
    name = key;
  }
  if (table == "env") {
    if (name.empty()) return fail(what + ": expected env.NAME=VALUE");
    profile.env[name] = std::string(value);
    return {};
  }
  const Field* field = detail::findField(table, name);
  if (field == nullptr) {
    std::vector<std::string> paths;
    std::vector<std::string_view> candidates;
    for (const Field& f : detail::fields()) paths.push_back(f.path());
    for (const auto& p : paths) candidates.push_back(p);
    return fail(what + ": unknown key '" + std::string(key) + "'" +
                didYouMean(detail::closest(key, candidates)));
  }
  const bool is_string = std::holds_alternative<std::string* (*)(Profile&)>(field->ref);
  toml::table doc;
  const std::string toml_text = "v = " + std::string(value);
  std::optional<std::string> syntax_error;
  try {
    doc = toml::parse(toml_text);
  } catch (const toml::parse_error& e) {
    syntax_error = std::string(e.description());
  }
  if (syntax_error) {
    if (!is_string) return fail(what + ": invalid TOML value: " + *syntax_error);
    doc.insert("v", std::string(value));
  }
  Diags diags(what, /*positions=*/false);
  Where where;
  Profile updated = profile;
  const toml::node* node = doc.get("v");
  if (node == nullptr) return fail(what + ": expected KEY=VALUE");
  applyField(*field, *node, updated, where, "", diags);
  if (!diags.empty()) return diags.first();
  profile = std::move(updated);
  return {};
}

Result<const Profile*> Policy::profile(std::string_view name) const {
  if (name.empty()) name = default_profile;
  if (auto it = profiles.find(std::string(name)); it != profiles.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [n, p] : profiles) names.push_back(n);
  return fail("unknown profile '" + std::string(name) + "' (policy " + source +
              " has: " + listOrNone(names) + ")");
}

Policy builtinDefault() {
  // Built in code, not parsed: parsing even the two-line head below took ~0.35 ms of every
  // `airlock run` on a slow host, and the built-in profile table ~0.6 ms before that. What
  // parse() would make of the text is the same (PolicyBuiltin.EqualsItsDefaultsSpelledOutAndParsed
  // parses it and compares), and the hash is still of the whole text, so it changes when a
  // default does. The defaults in policy.h fail their own validate(); a test says so.
  Policy policy;
  policy.source = "<built-in>";
  Profile profile;
  profile.name = policy.default_profile;
  Tenant tenant;
  tenant.name = kDefaultTenant;
  policy.tenants.emplace(tenant.name, std::move(tenant));
  policy.hash = sha256Hex("schema = " + std::to_string(kSchemaVersion) + "\ndefault_profile = \"" +
                          policy.default_profile + "\"\n\n" + profileToToml(profile));
  policy.profiles.emplace(profile.name, std::move(profile));
  return policy;
}

std::vector<std::string> profileKeys() {
  std::vector<std::string> keys;
  for (const Field& f : detail::fields()) {
    keys.push_back(f.path());
    if (f.key == "env") keys.push_back(std::string(detail::kExtendsKey));
  }
  return keys;
}

}  // namespace airlock::policy
