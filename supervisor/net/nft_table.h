// airlock's own nftables table (libnftables): masquerade for sandbox sources, a forward filter
// that lets each sandbox link send only from its own address, and an input filter that keeps
// sandboxes off the host's own services. Only this table is ever created, changed or deleted;
// every other table on the host is left alone (docs/network.md has the ruleset).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "airlock/result.h"

struct nft_ctx;

namespace airlock::net {

// One sandbox's entry in the table's sets.
struct NftSandbox {
  std::string link;        // host end of its veth ("al-…")
  std::string sandbox_v4;  // its address
  std::string sandbox_v6;  // "" without IPv6
  // Statements of the link's own filter chain (link_filter.h), for a sandbox whose policy is
  // enforced here; "" for one whose connections the eBPF hooks decide.
  std::string filter;
};

// Not thread-safe: the caller serializes (NetworkHost holds a mutex).
class NftTable {
 public:
  // `table` is the inet table's name; `link_prefix` the name prefix of every sandbox link.
  static Result<NftTable> open(std::string table, std::string link_prefix);
  NftTable(NftTable&&) noexcept = default;
  ~NftTable();

  // Creates the table with its chains and empty sets, replacing a leftover table of the same
  // name in the same transaction (a crashed supervisor's), so rules are never duplicated.
  Result<> install();
  // Deletes the table. A table already gone is not an error.
  Result<> remove();
  bool exists();
  // Whether any sandbox is in the table's sets (errors count as yes).
  bool hasElements();
  Result<> addSandbox(const NftSandbox& sandbox);
  Result<> removeSandbox(const NftSandbox& sandbox);
  // Replaces the statements of a filtered sandbox's chain, in one transaction.
  Result<> replaceFilter(const NftSandbox& sandbox);
  // Makes the sets hold exactly these sandboxes, in one transaction.
  Result<> replaceSandboxes(const std::vector<NftSandbox>& sandboxes);

 private:
  struct Free {
    void operator()(nft_ctx* ctx) const;
  };
  NftTable(std::unique_ptr<nft_ctx, Free> ctx, std::string table, std::string link_prefix);
  // Runs nft commands as one transaction; the error carries `what` and nft's message.
  Result<> run(const std::string& commands, const std::string& what);
  std::string elements(const NftSandbox& sandbox, const char* verb) const;
  // "add rule" commands for the statements of a sandbox's filter chain.
  std::string filterRules(const NftSandbox& sandbox) const;

  std::unique_ptr<nft_ctx, Free> ctx_;
  std::string table_;
  std::string link_prefix_;
};

}  // namespace airlock::net
