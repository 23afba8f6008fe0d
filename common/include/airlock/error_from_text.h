// An Error rebuilt from a message that crossed a boundary as text (an agent's error frame, a
// plugin's airlock_error_v1) together with its errno. Such a message is usually an
// Error::message() already, ending in ": ENOENT (No such file or directory)"; Error::message()
// would add that again, so it is taken off here and the errno kept (callers test errnum()).
#pragma once

#include <cstring>
#include <string>

#include "airlock/result.h"

namespace airlock {

inline Error errorFromText(std::string message, int err) {
  if (err != 0) {
    const std::string said =
        std::string(": ") + Error::errnoName(err) + " (" + std::strerror(err) + ")";
    if (message.ends_with(said)) message.resize(message.size() - said.size());
  }
  return Error(std::move(message), {}, err);
}

}  // namespace airlock
