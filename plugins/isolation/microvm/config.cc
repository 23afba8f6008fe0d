#include "config.h"

#include <nlohmann/json.hpp>

namespace airlock::isolation::microvm {

Result<Config> parseConfig(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return fail("microvm config is not a JSON object", std::string(json));
  Config c;
  for (auto& [key, value] : j.items()) {
    auto text = [&](std::string& out, bool absolute) -> Result<> {
      if (!value.is_string()) return fail("microvm." + key + " must be a string");
      out = value.get<std::string>();
      if (absolute && !out.empty() && !out.starts_with('/'))
        return fail("microvm." + key + " must be an absolute path", out);
      return {};
    };
    auto number = [&](auto& out, uint64_t lo, uint64_t hi) -> Result<> {
      if (!value.is_number_unsigned() || value.get<uint64_t>() < lo || value.get<uint64_t>() > hi)
        return fail("microvm." + key + " must be a number from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
      out = static_cast<std::remove_reference_t<decltype(out)>>(value.get<uint64_t>());
      return {};
    };
    Result<> r;
    if (key == "qemu") {
      r = text(c.qemu, true);
    } else if (key == "accel") {
      r = text(c.accel, false);
      if (r && c.accel != "kvm" && c.accel != "tcg" && c.accel != "auto")
        r = fail("microvm.accel must be kvm, tcg or auto", c.accel);
    } else if (key == "kernel") {
      r = text(c.kernel, true);
    } else if (key == "cache_dir") {
      r = text(c.cache_dir, true);
    } else if (key == "vcpus") {
      r = number(c.vcpus, 0, 64);
    } else if (key == "memory_mb") {
      r = number(c.memory_mb, 0, 1u << 20);
    } else if (key == "boot_timeout_s") {
      r = number(c.boot_timeout_s, 5, 600);
    } else if (key == "file_size_mb") {
      uint64_t mb = 0;
      r = number(mb, 1, 1u << 30);
      c.file_size_bytes = mb << 20;
    } else if (key == "snapshots") {
      if (value.is_boolean())
        c.snapshots = value.get<bool>();
      else
        r = fail("microvm.snapshots must be true or false");
    } else {
      r = fail("microvm." + key +
               ": unknown key (known: qemu, accel, vcpus, memory_mb, kernel, cache_dir, "
               "boot_timeout_s, snapshots, file_size_mb)");
    }
    if (!r) return Unexpected(r.error());
  }
  if (c.cache_dir.empty()) return fail("microvm.cache_dir must not be empty");
  return c;
}

}  // namespace airlock::isolation::microvm
