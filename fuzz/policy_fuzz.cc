// The policy file (policy/parse.cc, validate.cc and the checks beside them) fed arbitrary text:
// operators write it, tenants' tokens and pools come from it, and `airlock policy check` runs it
// on files nobody has vetted yet.
//
// Invariants checked (the same as tests/unit/policy_fuzz_test.cc): parse() returns a policy or
// an error that starts with the source name; a parsed policy validates whole and profile by
// profile, has its default profile and the "default" tenant, and a 64-digit hash; what follows a
// successful parse (relaxations, explain) never fails on it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "support/fuzz_check.h"

namespace policy = airlock::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = policy::parse(text, "fuzz.toml");
  if (!p) {
    const std::string msg = p.error().message();
    FUZZ_CHECK(msg.starts_with("fuzz.toml"));
    return 0;
  }
  FUZZ_CHECK(p->profiles.contains(p->default_profile));
  FUZZ_CHECK(p->tenants.contains("default"));
  FUZZ_CHECK(p->hash.size() == 64);
  FUZZ_CHECK(policy::validate(*p).has_value());
  for (const auto& [name, profile] : p->profiles) {
    FUZZ_CHECK(policy::validate(profile).has_value());
    (void)policy::relaxations(profile);
    for (const auto& [tenant_name, tenant] : p->tenants)
      FUZZ_CHECK(!policy::explainText(*p, profile, &tenant).empty());
  }
  (void)policy::relaxations(*p);
  FUZZ_CHECK(p->profile("").has_value());
  FUZZ_CHECK(p->tenant("").has_value());
  return 0;
}
