// The plugin ABI cannot change by accident.
//
// 1. The bytes of sdk/include/airlock/plugin_abi_v1.h are pinned per "<major>.<minor>" in
//    tests/unit/abi_hashes.txt (envoy's abi_version.h idea): editing the header without bumping
//    AIRLOCK_PLUGIN_ABI_MINOR (fields appended) or AIRLOCK_PLUGIN_ABI_MAJOR (anything else) and
//    recording the new hash fails here.
// 2. The layout every compiled plugin relies on is asserted field by field (x86_64).
#include <airlock/plugin_abi_v1.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "test_support.h"

namespace {

// --- layout ----------------------------------------------------------------------------------

#if defined(__x86_64__)
#define AIRLOCK_ABI_LAYOUT(type, size) static_assert(sizeof(type) == (size), #type " size")
#define AIRLOCK_ABI_FIELD(type, field, offset) \
  static_assert(offsetof(type, field) == (offset), #type "." #field " offset")

AIRLOCK_ABI_LAYOUT(airlock_str_v1, 16);
AIRLOCK_ABI_FIELD(airlock_str_v1, ptr, 0);
AIRLOCK_ABI_FIELD(airlock_str_v1, len, 8);

AIRLOCK_ABI_LAYOUT(airlock_error_v1, 516);
AIRLOCK_ABI_FIELD(airlock_error_v1, code, 0);
AIRLOCK_ABI_FIELD(airlock_error_v1, message, 4);

AIRLOCK_ABI_LAYOUT(airlock_host_v1, 24);
AIRLOCK_ABI_FIELD(airlock_host_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_host_v1, ctx, 8);
AIRLOCK_ABI_FIELD(airlock_host_v1, log, 16);

AIRLOCK_ABI_LAYOUT(airlock_mount_v1, 24);
AIRLOCK_ABI_FIELD(airlock_mount_v1, source, 0);
AIRLOCK_ABI_FIELD(airlock_mount_v1, target, 8);
AIRLOCK_ABI_FIELD(airlock_mount_v1, flags, 16);

AIRLOCK_ABI_LAYOUT(airlock_sandbox_spec_v1, 160);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, sandbox_id, 8);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, hostname, 16);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, host_uid_base, 24);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, host_gid_base, 28);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, id_count, 32);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, user_uid, 36);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, user_gid, 40);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, image_dir, 48);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, mounts, 56);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, mounts_len, 64);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, workspace_bytes, 72);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, tmp_bytes, 80);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, scratch_dir, 88);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, cgroup_v2_fd, 96);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, attach_cgroups, 104);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, attach_ctx, 112);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, agent_exe_fd, 120);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, agent_channel_fd, 124);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, agent_argv, 128);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, network_mode, 136);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, resolv_conf, 144);
AIRLOCK_ABI_FIELD(airlock_sandbox_spec_v1, netns_fd, 152);

AIRLOCK_ABI_LAYOUT(airlock_sandbox_v1, 32);
AIRLOCK_ABI_FIELD(airlock_sandbox_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_sandbox_v1, pid, 4);
AIRLOCK_ABI_FIELD(airlock_sandbox_v1, pidfd, 8);
AIRLOCK_ABI_FIELD(airlock_sandbox_v1, handle, 16);
AIRLOCK_ABI_FIELD(airlock_sandbox_v1, events_fd, 24);

AIRLOCK_ABI_LAYOUT(airlock_sandbox_event_v1, 88);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, kind, 4);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, time_ns, 8);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, pid, 16);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, uid, 20);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, comm, 24);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, path, 32);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, argv, 40);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, argc, 48);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, family, 52);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, address, 56);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, port, 72);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, protocol, 74);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, result_errno, 76);
AIRLOCK_ABI_FIELD(airlock_sandbox_event_v1, lost, 80);

AIRLOCK_ABI_LAYOUT(airlock_adopt_spec_v1, 64);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, sandbox_id, 8);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, scratch_dir, 16);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, pid, 24);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, pidfd, 28);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, cgroup_v2_fd, 32);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, attach_cgroups, 40);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, attach_ctx, 48);
AIRLOCK_ABI_FIELD(airlock_adopt_spec_v1, timeout_ms, 56);

AIRLOCK_ABI_LAYOUT(airlock_isolation_ops_v1, 72);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, start, 8);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, release, 16);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, extra_syscalls, 24);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, flags, 32);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, host_pids_base, 36);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, host_pids_per_process, 40);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, host_memory_base_bytes, 48);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, read_events, 56);
AIRLOCK_ABI_FIELD(airlock_isolation_ops_v1, adopt, 64);

AIRLOCK_ABI_LAYOUT(airlock_code_request_v1, 40);
AIRLOCK_ABI_FIELD(airlock_code_request_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_code_request_v1, source, 4);
AIRLOCK_ABI_FIELD(airlock_code_request_v1, code, 8);
AIRLOCK_ABI_FIELD(airlock_code_request_v1, path, 24);
AIRLOCK_ABI_FIELD(airlock_code_request_v1, args, 32);

AIRLOCK_ABI_LAYOUT(airlock_command_v1, 32);
AIRLOCK_ABI_FIELD(airlock_command_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_command_v1, argv, 8);
AIRLOCK_ABI_FIELD(airlock_command_v1, env, 16);
AIRLOCK_ABI_FIELD(airlock_command_v1, plugin_data, 24);

AIRLOCK_ABI_LAYOUT(airlock_language_ops_v1, 56);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, aliases, 8);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, extensions, 16);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, image_paths, 24);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, max_inline_bytes, 32);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, build_command, 40);
AIRLOCK_ABI_FIELD(airlock_language_ops_v1, free_command, 48);

AIRLOCK_ABI_LAYOUT(airlock_plugin_v1, 56);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, struct_size, 0);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, abi_major, 4);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, abi_minor, 6);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, name, 8);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, version, 16);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, kind, 24);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, create, 32);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, destroy, 40);
AIRLOCK_ABI_FIELD(airlock_plugin_v1, ops, 48);
#endif

// Values are part of the ABI too: never renumbered.
static_assert(AIRLOCK_PLUGIN_ISOLATION == 1 && AIRLOCK_PLUGIN_LANGUAGE == 2 &&
              AIRLOCK_PLUGIN_TRANSFER == 3 && AIRLOCK_PLUGIN_REVIEW == 4);
static_assert(AIRLOCK_CODE_INLINE == 1 && AIRLOCK_CODE_FILE == 2 && AIRLOCK_CODE_SESSION == 3 &&
              AIRLOCK_CODE_PRESTART == 4);
static_assert(AIRLOCK_MOUNT_READONLY == 1u && AIRLOCK_MOUNT_OPTIONAL == 2u);
static_assert(AIRLOCK_NETWORK_LOOPBACK == 0 && AIRLOCK_NETWORK_LINKED == 1);

TEST(PluginAbi, EntrySymbolName) {
  EXPECT_STREQ(AIRLOCK_PLUGIN_ENTRY_SYMBOL, "airlock_plugin_entry_v1");
}

// --- header hash -----------------------------------------------------------------------------

// SHA-256 (FIPS 180-4), so the recorded value is what `sha256sum` prints.
std::string sha256Hex(const std::string& data) {
  static constexpr uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  std::string m = data;
  uint64_t bits = uint64_t{data.size()} * 8;
  m.push_back(static_cast<char>(0x80));
  while (m.size() % 64 != 56) m.push_back('\0');
  for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (size_t chunk = 0; chunk < m.size(); chunk += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(m.data() + chunk + 4 * i);
      w[i] = uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
  char out[65];
  for (int i = 0; i < 8; ++i) std::snprintf(out + 8 * i, 9, "%08x", h[i]);
  return std::string(out, 64);
}

TEST(PluginAbi, Sha256MatchesKnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(PluginAbi, HeaderChangesBumpTheVersion) {
  std::string header_path = airlock::testing::sourceDir() + "/sdk/include/airlock/plugin_abi_v1.h";
  std::string header = airlock::testing::readFile(header_path);
  ASSERT_FALSE(header.empty()) << "cannot read " << header_path;
  std::string actual = sha256Hex(header);
  std::string version =
      std::to_string(AIRLOCK_PLUGIN_ABI_MAJOR) + "." + std::to_string(AIRLOCK_PLUGIN_ABI_MINOR);

  std::string hashes_path = airlock::testing::sourceDir() + "/tests/unit/abi_hashes.txt";
  std::ifstream hashes(hashes_path);
  ASSERT_TRUE(hashes) << "cannot read " << hashes_path;
  std::string line, recorded;
  while (std::getline(hashes, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string v, h;
    fields >> v >> h;
    if (v == version) recorded = h;
  }
  std::string how =
      "\nIf the change alters the layout or meaning of anything in the header, bump "
      "AIRLOCK_PLUGIN_ABI_MAJOR (incompatible) or AIRLOCK_PLUGIN_ABI_MINOR (fields appended at "
      "the end of a struct, guarded by struct_size); then record the new hash in "
      "tests/unit/abi_hashes.txt as the line\n  " +
      version + " " + actual +
      "\n(`sha256sum sdk/include/airlock/plugin_abi_v1.h` prints the same hash).";
  ASSERT_FALSE(recorded.empty()) << "no hash recorded for plugin ABI " << version << how;
  EXPECT_EQ(recorded, actual) << "sdk/include/airlock/plugin_abi_v1.h changed but plugin ABI "
                              << version << " was recorded with another hash." << how;
}

}  // namespace
