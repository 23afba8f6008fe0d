// A backend's failure as the host shows it: "<backend>: <message>" with the errno apart.
// Header-only: each backend is its own shared library.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include <airlock/result.h>
#include <airlock/plugin.hpp>

namespace airlock::isolation {

// The host appends the errno's name to the message itself: it is left out here.
[[noreturn]] inline void throwPluginError(const Error& error, const std::string& backend) {
  std::string m = error.message();
  if (error.errnum() != 0) {
    const std::string tail = std::string(": ") + Error::errnoName(error.errnum()) + " (" +
                             std::strerror(error.errnum()) + ")";
    if (m.ends_with(tail)) m.erase(m.size() - tail.size());
  }
  throw sdk::PluginError(error.errnum() != 0 ? error.errnum() : EIO, backend + ": " + m);
}

}  // namespace airlock::isolation
