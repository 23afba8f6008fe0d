#include "landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace airlock::agent {
namespace {

// Debian 12's linux-libc-dev (6.1) stops at ABI 2; later constants are defined here.
constexpr uint64_t kAccessTruncate = 1ULL << 14;          // ABI 3
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6
constexpr uint32_t kCreateRulesetVersion = 1U << 0;
constexpr int kRulePathBeneath = 1;

// struct landlock_ruleset_attr as of ABI 6; the size passed tells the kernel which fields exist.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

constexpr uint64_t kWriteAccessAbi1 =
    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
    LANDLOCK_ACCESS_FS_MAKE_SYM;
constexpr uint64_t kReferAccess = 1ULL << 13;  // ABI 2
// Rights that make sense on a file (not a directory) rule.
constexpr uint64_t kFileAccess = LANDLOCK_ACCESS_FS_WRITE_FILE | kAccessTruncate;

long createRuleset(const void* attr, size_t size, uint32_t flags) {
  return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

}  // namespace

int LandlockRuleset::abiVersion() {
  long abi = createRuleset(nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

Result<LandlockRuleset> LandlockRuleset::create(const std::vector<std::string>& writable_paths) {
  LandlockRuleset r;
  long abi = createRuleset(nullptr, 0, kCreateRulesetVersion);
  if (abi < 0) {
    if (errno == ENOSYS || errno == EOPNOTSUPP) return r;  // not built or disabled: not an error
    return sysError("landlock_create_ruleset(VERSION)");
  }
  r.abi_ = static_cast<int>(abi);

  uint64_t handled = kWriteAccessAbi1;
  if (abi >= 2) handled |= kReferAccess;
  if (abi >= 3) handled |= kAccessTruncate;
  RulesetAttr attr{handled, 0, 0};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) size = 2 * sizeof(uint64_t);
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    size = sizeof(RulesetAttr);
  }
  long fd = createRuleset(&attr, size, 0);
  if (fd < 0) return sysError("landlock_create_ruleset", "ABI " + std::to_string(abi));
  r.fd_.reset(static_cast<int>(fd));

  for (const auto& path : writable_paths) {
    UniqueFd dir(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!dir) {
      if (errno == ENOENT) continue;
      return sysError("open(O_PATH) writable path", path);
    }
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return sysError("fstat writable path", path);
    PathBeneathAttr rule{S_ISDIR(st.st_mode) ? handled : (handled & kFileAccess), dir.get()};
    if (::syscall(SYS_landlock_add_rule, r.fd_.get(), kRulePathBeneath, &rule, 0) != 0)
      return sysError("landlock_add_rule", path);
  }
  return r;
}

int landlockRestrictSelf(int ruleset_fd) {
  return static_cast<int>(::syscall(SYS_landlock_restrict_self, ruleset_fd, 0));
}

}  // namespace airlock::agent
