// The image store: root filesystems that sandboxes use as their read-only root
// ([profiles.X.filesystem] image = "NAME"), shared by every sandbox and every backend.
//
//   <root>/blobs/<hex>/rootfs/       the tree, never changed once published
//   <root>/blobs/<hex>/digest        "sha256:<hex>": what the tree is (the microVM cache keys on
//   it) <root>/blobs/<hex>/image.json    metadata: source, created, size, packages
//   <root>/names/<name>              "sha256:<hex>\n": which blob a name means now
//   <root>/tmp/<staging>/            builds and imports in progress
//   <root>/lock                      flock()ed by every mutation
//
// A build or import writes only inside its staging directory and is renamed into blobs/ at the
// end, so a failure (or a kill) leaves no half-made image: the staging directory is removed by
// its owner, or by the next mutation of the store, which holds the lock and therefore knows
// that nothing else is building.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::images {

// $AIRLOCK_IMAGE_STORE when set (tests, a second store), else /var/lib/airlock/images.
std::string defaultStoreRoot();

struct ImageInfo {
  std::string name;  // "" for a blob no name points at
  std::string digest;
  nlohmann::json meta;  // image.json
};

// A build's or import's private directory under <root>/tmp, removed on destruction unless it
// was published.
class Staging {
 public:
  Staging() = default;
  explicit Staging(std::string path) : path_(std::move(path)) {}
  Staging(Staging&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  Staging& operator=(Staging&&) = delete;
  Staging(const Staging&) = delete;
  ~Staging();
  const std::string& path() const { return path_; }
  std::string rootfs() const { return path_ + "/rootfs"; }
  void release() { path_.clear(); }  // it was renamed into place: nothing to remove

 private:
  std::string path_;
};

class Store {
 public:
  // Opens the store at `root`; with `create`, makes its directories (0755: a sandbox's uid must
  // be able to walk to the rootfs it is given). Without it, a missing store is an empty one.
  static Result<Store> open(std::string root, bool create);

  const std::string& root() const { return root_; }

  // The rootfs directory `name` means now; an error that says how to list the images if there
  // is no such image.
  Result<std::string> rootfsFor(const std::string& name) const;
  Result<std::string> digestOf(const std::string& name) const;
  Result<ImageInfo> inspect(const std::string& name) const;
  // Every named image (sorted by name), then blobs no name points at.
  Result<std::vector<ImageInfo>> list() const;

  // The store's lock, held for the whole of a mutation (build, import, rm). Taking it removes
  // what earlier mutations that died left in tmp/. `waiting` is called once if another
  // process holds it.
  class Lock {
   public:
    explicit Lock(UniqueFd fd) : fd_(std::move(fd)) {}

   private:
    UniqueFd fd_;
  };
  Result<Lock> lock(const std::function<void(const std::string&)>& waiting = {}) const;

  // A new, empty staging directory (0755) under tmp/. Needs the lock.
  Result<Staging> stage() const;

  // Moves the staging directory's rootfs into blobs/<hex> (unless that blob exists already:
  // the same content built twice) with `meta` as its image.json, then points `name` at it.
  // A blob the name pointed at before, and no other name does, is removed. Needs the lock.
  Result<> publish(Staging& staging, const std::string& name, const std::string& digest,
                   nlohmann::json meta) const;

  // Removes the name, and its blob when no other name points at it. Needs the lock.
  Result<> remove(const std::string& name) const;

 private:
  explicit Store(std::string root) : root_(std::move(root)) {}
  std::string blobDir(const std::string& digest) const;
  Result<> removeBlobIfUnnamed(const std::string& digest) const;

  std::string root_;
};

// "sha256:<64 lowercase hex>" or an error naming what it got.
Result<> checkDigest(const std::string& digest);

// Apparent size in bytes of every regular file under `dir` (symlinks not followed).
uint64_t treeBytes(const std::string& dir);

}  // namespace airlock::images
