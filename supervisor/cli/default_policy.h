// Where `airlock serve`, `airlock audit` and `airlock image prepare` look for the installed policy
// when none is given: <sysconfdir>/airlock/policy.toml of the configured install prefix
// (/usr/local/etc/... for a source install, /etc/... for the Debian package).
#pragma once

namespace airlock::cli {

const char* defaultPolicyPath();

}  // namespace airlock::cli
