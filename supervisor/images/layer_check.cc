#include "supervisor/images/layer_check.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <optional>
#include <vector>

namespace airlock::images {
namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";

// The entry's path as the layer means it: "./etc/x/" → "etc/x". nullopt with `why` set when it
// is absolute or has a '..' component.
std::optional<std::string> relativePath(std::string_view p, std::string& why) {
  // "/" alone is the root directory itself (umoci insert writes it so): nothing outside.
  if (!p.empty() && p.find_first_not_of('/') == std::string_view::npos) return std::string();
  if (p.starts_with("/")) {
    why = "an absolute path";
    return std::nullopt;
  }
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view part = p.substr(i, j - i);
    if (part == "..") {
      why = "a '..' component";
      return std::nullopt;
    }
    if (!part.empty() && part != ".") parts.push_back(part);
    i = j + 1;
  }
  std::string out;
  for (auto part : parts) out += (out.empty() ? "" : "/") + std::string(part);
  return out;
}

std::string parentOf(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

}  // namespace

Result<> LayerChecker::check(const std::string& blob_path, const std::string& layer_name) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  const std::string where = "layer " + layer_name;
  if (archive_read_open_filename(a.get(), blob_path.c_str(), 1 << 16) != ARCHIVE_OK)
    return fail(where + ": not a readable tar: " + archive_error_string(a.get()));

  // The first symlink among `path`'s proper ancestors, or "".
  auto throughSymlink = [&](const std::string& path) -> std::string {
    for (std::string p = parentOf(path); !p.empty(); p = parentOf(p))
      if (symlinks_.contains(p)) return p;
    return "";
  };
  auto forgetUnder = [&](const std::string& dir) {
    for (auto it = symlinks_.lower_bound(dir + "/");
         it != symlinks_.end() && it->starts_with(dir + "/");)
      it = symlinks_.erase(it);
  };

  archive_entry* e = nullptr;
  for (;;) {
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      return fail(where + ": not a readable tar: " + archive_error_string(a.get()));
    ++entries_;
    const char* raw = archive_entry_pathname(e);
    const std::string shown = raw != nullptr ? raw : "";
    auto bad = [&](const std::string& why) {
      return fail(where + ": entry '" + shown + "': " + why);
    };
    std::string why;
    auto path = relativePath(shown, why);
    if (!path) return bad(why);
    if (path->empty()) continue;  // "./": the root itself

    switch (archive_entry_filetype(e)) {
      case AE_IFCHR:
        return bad("a character device (images may not hold device files)");
      case AE_IFBLK:
        return bad("a block device (images may not hold device files)");
      case AE_IFIFO:
        return bad("a fifo (images may not hold fifos)");
      case AE_IFSOCK:
        return bad("a socket (images may not hold sockets)");
      default:
        break;
    }
    if (std::string via = throughSymlink(*path); !via.empty())
      return bad("goes through the symlink '" + via +
                 "' (unpacked, it would be written "
                 "wherever that points)");

    const char* hard = archive_entry_hardlink(e);
    if (hard != nullptr) {
      std::string hwhy;
      auto target = relativePath(hard, hwhy);
      if (!target || target->empty())
        return bad("a hard link to '" + std::string(hard) + "' outside the image (" +
                   (target ? "its root" : hwhy) + ")");
      if (std::string via = throughSymlink(*target); !via.empty())
        return bad("a hard link to '" + std::string(hard) + "' through the symlink '" + via + "'");
    }

    const std::string base = path->substr(path->rfind('/') + 1);
    const std::string dir = parentOf(*path);
    if (base.starts_with(kWhiteout)) {
      if (base == kOpaque) {  // the directory's lower-layer contents are hidden
        forgetUnder(dir);
        continue;
      }
      const std::string target = base.substr(kWhiteout.size());
      if (target.starts_with(kWhiteout))
        return bad("AUFS whiteout metadata (only " + std::string(kOpaque) + " is allowed)");
      if (target.empty() || target == "." || target == "..")
        return bad("a whiteout of '" + target + "', which is not an entry of its directory");
      const std::string hidden = dir.empty() ? target : dir + "/" + target;
      symlinks_.erase(hidden);
      forgetUnder(hidden);
      continue;
    }
    if (archive_entry_filetype(e) == AE_IFLNK && hard == nullptr) {
      symlinks_.insert(*path);
    } else {
      symlinks_.erase(*path);  // replaced by a file or directory
      if (archive_entry_filetype(e) != AE_IFDIR) forgetUnder(*path);
    }
  }
  return {};
}

}  // namespace airlock::images
