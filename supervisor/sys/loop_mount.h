// Mounting a filesystem image through a loop device.
//
// The loop device is configured with LO_FLAGS_AUTOCLEAR: it detaches itself when the mount goes
// away, however that happens (umount, lazy umount after a crash), so nothing is left to free.
#pragma once

#include <sys/types.h>

#include <string>

#include "airlock/result.h"

namespace airlock::sys {

// Attaches image_fd (opened O_RDWR) to a free loop device and mounts it at mountpoint.
Result<> mountImage(int image_fd, const std::string& mountpoint, const std::string& fstype,
                    unsigned long flags);

}  // namespace airlock::sys
