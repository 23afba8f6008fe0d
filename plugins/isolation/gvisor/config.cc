#include "config.h"

#include <nlohmann/json.hpp>

namespace airlock::isolation::gvisor {

Result<Config> parseConfig(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return fail("gvisor config is not a JSON object", std::string(json));
  Config c;
  for (auto& [key, value] : j.items()) {
    auto text = [&](std::string& out) -> Result<> {
      if (!value.is_string()) return fail("gvisor." + key + " must be a string");
      out = value.get<std::string>();
      return {};
    };
    if (key == "runsc") {
      if (auto r = text(c.runsc); !r) return Unexpected(r.error());
      if (!c.runsc.starts_with('/')) return fail("gvisor.runsc must be an absolute path", c.runsc);
    } else if (key == "platform") {
      if (auto r = text(c.platform); !r) return Unexpected(r.error());
      if (c.platform != "ptrace" && c.platform != "systrap" && c.platform != "kvm")
        return fail("gvisor.platform must be ptrace, systrap or kvm", c.platform);
    } else if (key == "overlay") {
      if (auto r = text(c.overlay); !r) return Unexpected(r.error());
      if (c.overlay != "none" && c.overlay != "memory" && c.overlay != "disk")
        return fail("gvisor.overlay must be none, memory or disk", c.overlay);
    } else if (key == "flags") {
      if (!value.is_array()) return fail("gvisor.flags must be an array of strings");
      for (const auto& f : value) {
        if (!f.is_string()) return fail("gvisor.flags must be an array of strings");
        if (!policy::gvisorFlagAllowed(f.get<std::string>()))
          return fail("gvisor.flags: '" + f.get<std::string>() +
                      "' is not an allowed runsc flag (allowed: " + policy::gvisorFlagList() + ")");
        c.flags.push_back(f.get<std::string>());
      }
    } else {
      return fail("gvisor." + key + ": unknown key (known: runsc, platform, overlay, flags)");
    }
  }
  return c;
}

}  // namespace airlock::isolation::gvisor
