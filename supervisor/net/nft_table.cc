#include "supervisor/net/nft_table.h"

#include "supervisor/net/link_filter.h"

#include <dlfcn.h>
#include <nftables/libnftables.h>

#include <cerrno>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace airlock::net {
namespace {

// The whole table. @LINKS@ is the link-name wildcard ("al-*"), @TABLE@ the table's name. Sets hold
// one element per attached sandbox; rules never change after install().
//   forward: a packet from a sandbox link must carry that link's own source address (a sandbox
//     that is root in its namespace could otherwise spoof another's) and must not go to another
//     sandbox; into a sandbox link only replies of connections it opened. A new connection from
//     a link in the map `filters` goes through that sandbox's own chain (link_filter.h: its
//     network policy, for backends whose connections the eBPF hooks cannot see), which ends in
//     accept or `refuse` (link_filter.h says why these rejects).
//   input: a sandbox reaches nothing on the host itself (its gateway address, host services on
//     0.0.0.0) except the neighbour discovery IPv6 needs on the link.
//   postrouting: sandbox sources leave masqueraded behind the outgoing interface's address.
constexpr const char* kRuleset = R"(table inet @TABLE@ {
  set links4 { type ifname . ipv4_addr; }
  set links6 { type ifname . ipv6_addr; }
  set sources4 { type ipv4_addr; }
  set sources6 { type ipv6_addr; }
  map filters { type ifname : verdict; }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "@LINKS@" jump from_sandbox
    oifname "@LINKS@" ct state established,related accept
    oifname "@LINKS@" drop
  }
  chain from_sandbox {
    oifname "@LINKS@" drop
    meta nfproto ipv4 iifname . ip saddr @links4 goto sandbox_out
    meta nfproto ipv6 iifname . ip6 saddr @links6 goto sandbox_out
    drop
  }
  chain sandbox_out {
    ct state established,related accept
    iifname vmap @filters
    accept
  }
  chain refuse {
    meta l4proto tcp reject with tcp reset
    meta l4proto udp reject with icmpx port-unreachable
    reject with icmpx admin-prohibited
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "@LINKS@" jump sandbox_to_host
  }
  chain sandbox_to_host {
    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept
    drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr @sources4 masquerade
    ip6 saddr @sources6 masquerade
  }
}
)";

// libnftables is loaded on first use rather than linked: it brings five more shared libraries
// (libnftnl, libmnl, libxtables, libjansson, libgmp) whose loading would tax every `airlock`
// start, while only sandboxes with a network beyond loopback need it. The header still gives the
// exact signatures, so a mismatch is a compile error.
struct Libnftables {
  decltype(&nft_ctx_new) ctx_new = nullptr;
  decltype(&nft_ctx_free) ctx_free = nullptr;
  decltype(&nft_ctx_buffer_output) buffer_output = nullptr;
  decltype(&nft_ctx_buffer_error) buffer_error = nullptr;
  decltype(&nft_ctx_get_error_buffer) get_error_buffer = nullptr;
  decltype(&nft_ctx_get_output_buffer) get_output_buffer = nullptr;
  decltype(&nft_run_cmd_from_buffer) run_cmd_from_buffer = nullptr;
};

constexpr const char* kLibnftables = "libnftables.so.1";

Result<Libnftables> loadLibnftables() {
  void* handle = dlopen(kLibnftables, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return fail(std::string("cannot load libnftables (Debian package libnftables1): ") + dlerror(),
                kLibnftables);
  Libnftables lib;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    return fn != nullptr;
  };
  for (auto ok : {bind(lib.ctx_new, "nft_ctx_new"), bind(lib.ctx_free, "nft_ctx_free"),
                  bind(lib.buffer_output, "nft_ctx_buffer_output"),
                  bind(lib.buffer_error, "nft_ctx_buffer_error"),
                  bind(lib.get_error_buffer, "nft_ctx_get_error_buffer"),
                  bind(lib.get_output_buffer, "nft_ctx_get_output_buffer"),
                  bind(lib.run_cmd_from_buffer, "nft_run_cmd_from_buffer")}) {
    if (!ok) return fail("libnftables lacks a function airlock uses", kLibnftables);
  }
  return lib;  // the handle stays open for the life of the process
}

const Result<Libnftables>& libnftables() {
  static const Result<Libnftables> lib = loadLibnftables();
  return lib;
}

}  // namespace

void NftTable::Free::operator()(nft_ctx* ctx) const { libnftables()->ctx_free(ctx); }

NftTable::NftTable(std::unique_ptr<nft_ctx, Free> ctx, std::string table, std::string link_prefix)
    : ctx_(std::move(ctx)), table_(std::move(table)), link_prefix_(std::move(link_prefix)) {}

NftTable::~NftTable() = default;

Result<NftTable> NftTable::open(std::string table, std::string link_prefix) {
  const auto& lib = libnftables();
  if (!lib) return Unexpected(lib.error());
  std::unique_ptr<nft_ctx, Free> ctx(lib->ctx_new(NFT_CTX_DEFAULT));
  if (!ctx) return Unexpected(Error("nft_ctx_new", table, ENOMEM));
  // Keep nft's output and errors off the supervisor's stdout/stderr: errors go into Results.
  if (lib->buffer_output(ctx.get()) != 0 || lib->buffer_error(ctx.get()) != 0)
    return Unexpected(Error("nft_ctx_buffer_output", table, ENOMEM));
  return NftTable(std::move(ctx), std::move(table), std::move(link_prefix));
}

Result<> NftTable::run(const std::string& commands, const std::string& what) {
  const auto& lib = *libnftables();  // open() succeeded, so it is loaded
  if (lib.run_cmd_from_buffer(ctx_.get(), commands.c_str()) == 0) return {};
  std::string message = lib.get_error_buffer(ctx_.get());
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  // nft reports the first failing line; keep it short for one-line errors.
  if (auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
  return fail("nftables: " + what + ": " + message, "inet " + table_);
}

Result<> NftTable::install() {
  std::string links = link_prefix_ + "*";
  // "add table; delete table" makes the delete valid whether or not a leftover exists; the
  // whole buffer is one transaction, so the host never sees a half-built table.
  std::string ruleset = kRuleset;
  for (auto [token, value] : {std::pair{"@TABLE@", &table_}, std::pair{"@LINKS@", &links}})
    for (size_t at; (at = ruleset.find(token)) != std::string::npos;)
      ruleset.replace(at, std::string_view(token).size(), *value);
  std::string commands =
      "add table inet " + table_ + "\ndelete table inet " + table_ + "\n" + ruleset;
  return run(commands, "creating the airlock table");
}

Result<> NftTable::remove() {
  return run("add table inet " + table_ + "\ndelete table inet " + table_ + "\n",
             "deleting the airlock table");
}

bool NftTable::exists() {
  const auto& lib = *libnftables();
  const bool found =
      lib.run_cmd_from_buffer(ctx_.get(), ("list table inet " + table_).c_str()) == 0;
  // The listing stays in the output buffer until read: it would read as the next list's (a
  // table with elements, long after they went).
  (void)lib.get_output_buffer(ctx_.get());
  return found;
}

bool NftTable::hasElements() {
  const auto& lib = *libnftables();
  for (const char* set : {"sources4", "sources6"}) {
    std::string command = "list set inet " + table_ + " " + set;
    (void)lib.get_output_buffer(ctx_.get());  // only this listing is read below
    // Unreadable counts as in use: a table is never deleted under a sandbox by mistake.
    if (lib.run_cmd_from_buffer(ctx_.get(), command.c_str()) != 0) return true;
    if (std::string_view(lib.get_output_buffer(ctx_.get())).find("elements =") !=
        std::string_view::npos)
      return true;
  }
  return false;
}

Result<> NftTable::replaceSandboxes(const std::vector<NftSandbox>& sandboxes) {
  std::string commands;
  for (const char* set : {"links4", "links6", "sources4", "sources6"})
    commands += "flush set inet " + table_ + " " + set + "\n";
  // Every filter chain goes with its map element, except a kept sandbox's: its link is still
  // filtered, with the rules the dead supervisor last set (its new one replaces them).
  commands += "flush map inet " + table_ + " filters\n";
  std::set<std::string> kept_chains, surviving;
  for (const auto& sandbox : sandboxes) kept_chains.insert(linkFilterChain(sandbox.link));
  const auto& lib = *libnftables();
  (void)lib.get_output_buffer(ctx_.get());  // only this listing is read below
  if (lib.run_cmd_from_buffer(ctx_.get(), ("list table inet " + table_).c_str()) == 0) {
    std::string_view listing = lib.get_output_buffer(ctx_.get());
    for (size_t at = 0; (at = listing.find("chain filter_", at)) != std::string_view::npos;) {
      size_t end = listing.find_first_of(" {\n", at + 6);
      const std::string chain(listing.substr(at + 6, end - at - 6));
      if (kept_chains.contains(chain))
        surviving.insert(chain);
      else
        commands += "delete chain inet " + table_ + " " + chain + "\n";
      at = end;
    }
  }
  for (const auto& sandbox : sandboxes) {
    commands += elements(sandbox, "add");
    // Its chain survived (above): the link goes through it again.
    if (sandbox.filter.empty() && surviving.contains(linkFilterChain(sandbox.link)))
      commands += "add element inet " + table_ + " filters { \"" + sandbox.link + "\" : goto " +
                  linkFilterChain(sandbox.link) + " }\n";
  }
  return run(commands, "rebuilding the sandbox sets");
}

std::string NftTable::filterRules(const NftSandbox& s) const {
  const std::string chain = linkFilterChain(s.link);
  std::string out;
  size_t start = 0;
  while (start < s.filter.size()) {
    size_t end = s.filter.find('\n', start);
    if (end == std::string::npos) end = s.filter.size();
    if (end > start)
      out += "add rule inet " + table_ + " " + chain + " " + s.filter.substr(start, end - start) +
             "\n";
    start = end + 1;
  }
  return out;
}

std::string NftTable::elements(const NftSandbox& s, const char* verb) const {
  const std::string head = std::string(verb) + " element inet " + table_ + " ";
  const bool add = std::string_view(verb) == "add";
  std::string out;
  // A filter is in place before the link's addresses are let through, and goes after them.
  // Flushed: an adopted sandbox's chain may still hold the dead supervisor's rules.
  if (!s.filter.empty() && add)
    out += "add chain inet " + table_ + " " + linkFilterChain(s.link) + "\n" + "flush chain inet " +
           table_ + " " + linkFilterChain(s.link) + "\n" + filterRules(s) + head + "filters { \"" +
           s.link + "\" : goto " + linkFilterChain(s.link) + " }\n";
  out += head + "links4 { \"" + s.link + "\" . " + s.sandbox_v4 + " }\n" + head + "sources4 { " +
         s.sandbox_v4 + " }\n";
  if (!s.sandbox_v6.empty())
    out += head + "links6 { \"" + s.link + "\" . " + s.sandbox_v6 + " }\n" + head + "sources6 { " +
           s.sandbox_v6 + " }\n";
  if (!s.filter.empty() && !add)
    out += head + "filters { \"" + s.link + "\" }\n" + "delete chain inet " + table_ + " " +
           linkFilterChain(s.link) + "\n";
  return out;
}

Result<> NftTable::replaceFilter(const NftSandbox& sandbox) {
  return run("flush chain inet " + table_ + " " + linkFilterChain(sandbox.link) + "\n" +
                 filterRules(sandbox),
             "replacing the filter of " + sandbox.link);
}

Result<> NftTable::addSandbox(const NftSandbox& sandbox) {
  return run(elements(sandbox, "add"), "adding the elements of " + sandbox.link);
}

Result<> NftTable::removeSandbox(const NftSandbox& sandbox) {
  return run(elements(sandbox, "delete"), "deleting the elements of " + sandbox.link);
}

}  // namespace airlock::net
