#include "supervisor/sys/loop_mount.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include "airlock/unique_fd.h"

namespace airlock::sys {

Result<> mountImage(int image_fd, const std::string& mountpoint, const std::string& fstype,
                    unsigned long flags) {
  UniqueFd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control) return sysError("open", "/dev/loop-control");
  // Another process may take the device between GET_FREE and CONFIGURE: then ask again.
  for (int attempt = 0; attempt < 16; ++attempt) {
    int n = ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return sysError("LOOP_CTL_GET_FREE", "/dev/loop-control");
    std::string dev = "/dev/loop" + std::to_string(n);
    UniqueFd loop(open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (!loop) return sysError("open", dev);
    loop_config config{};
    config.fd = static_cast<uint32_t>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(loop.get(), LOOP_CONFIGURE, &config) != 0) {
      if (errno == EBUSY) continue;
      return sysError("LOOP_CONFIGURE", dev);
    }
    // The mount holds the device from here on; closing our fd leaves AUTOCLEAR to detach it
    // when the mount is gone.
    if (mount(dev.c_str(), mountpoint.c_str(), fstype.c_str(), flags, nullptr) != 0)
      return sysError("mount " + dev + " (" + fstype + ")", mountpoint);
    return {};
  }
  return fail("no free loop device after 16 attempts", mountpoint);
}

}  // namespace airlock::sys
