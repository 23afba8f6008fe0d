#include "plan.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <airlock/result.h>

namespace airlock::isolation {

const char* Plan::keep(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

char* const* Plan::keepVector(const std::vector<std::string>& v) {
  auto& out = vectors_.emplace_back();
  for (const auto& s : v) out.push_back(const_cast<char*>(keep(s)));
  out.push_back(nullptr);
  return out.data();
}

void Plan::add(const Step& step, std::string op, std::string subject) {
  steps_.push_back(step);
  ops_.push_back(std::move(op));
  subjects_.push_back(std::move(subject));
}

void Plan::openRoot(Stage st, const std::string& root) {
  add({.stage = st, .kind = StepKind::kOpenRoot, .path = keep(root)}, "open(O_PATH)", "/");
  root_ = root;
}

const char* Plan::beneathRoot(const std::string& path) {
  if (root_.empty()) return nullptr;
  if (path == root_) return keep("");
  if (path.size() > root_.size() && path.starts_with(root_) && path[root_.size()] == '/')
    return keep(path.substr(root_.size() + 1));
  return nullptr;
}

void Plan::mkdir(Stage st, const std::string& path, unsigned mode, std::string subject) {
  add({.stage = st, .kind = StepKind::kMkdir, .path = keep(path), .mode = mode}, "mkdir",
      std::move(subject));
}

void Plan::mkfile(Stage st, const std::string& path, std::string subject) {
  add({.stage = st, .kind = StepKind::kMkfile, .path = keep(path), .mode = 0444}, "open(O_CREAT)",
      std::move(subject));
}

void Plan::symlink(Stage st, const std::string& target, const std::string& path,
                   std::string subject) {
  add({.stage = st, .kind = StepKind::kSymlink, .path = keep(path), .source = keep(target)},
      "symlink(" + target + ")", std::move(subject));
}

void Plan::writeFile(Stage st, const std::string& path, std::string contents, unsigned mode,
                     std::string subject) {
  size_t len = contents.size();
  add({.stage = st,
       .kind = StepKind::kWriteFile,
       .path = keep(path),
       .source = keep(std::move(contents)),
       .len = len,
       .mode = mode},
      "write", std::move(subject));
}

void Plan::mount(Stage st, const char* fstype, const std::string& path, unsigned long flags,
                 const std::string& data, std::string subject) {
  add({.stage = st,
       .kind = StepKind::kMount,
       .path = keep(path),
       .source = fstype,
       .fstype = fstype,
       .data = data.empty() ? nullptr : keep(data),
       .flags = flags,
       .rel = beneathRoot(path)},
      std::string("mount(") + fstype + ")", std::move(subject));
}

void Plan::bind(Stage st, const std::string& source, const std::string& path, bool recursive,
                std::string subject) {
  add({.stage = st,
       .kind = StepKind::kMount,
       .path = keep(path),
       .source = keep(source),
       .flags = recursive ? static_cast<unsigned long>(MS_BIND | MS_REC)
                          : static_cast<unsigned long>(MS_BIND),
       .rel = beneathRoot(path),
       .source_rel = beneathRoot(source)},
      "mount(bind " + source + ")", std::move(subject));
}

Result<void> Plan::bindHost(Stage st, const std::string& source, const std::string& path,
                            bool recursive, uint64_t attrs, std::string subject) {
  const unsigned rec = recursive ? AT_RECURSIVE : 0;
  // A detached copy of the host tree, made with the supervisor's privileges; it lives only in
  // this fd until the child attaches it in its own mount namespace.
  UniqueFd fd(static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, source.c_str(),
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | rec)));
  if (!fd) return sysError("open_tree(mount source for " + subject + ")", source);
  struct mount_attr attr = {};
  attr.attr_set = attrs;
  if (attrs != 0 &&
      ::syscall(SYS_mount_setattr, fd.get(), "", AT_EMPTY_PATH | rec, &attr, sizeof attr) != 0)
    return sysError("mount_setattr(mount source for " + subject + ")", source);
  add({.stage = st,
       .kind = StepKind::kMoveMount,
       .path = keep(path),
       .fd = fd.get(),
       .rel = beneathRoot(path)},
      "move_mount(" + source + ")", std::move(subject));
  fds_.push_back(std::move(fd));
  return {};
}

void Plan::attachTree(Stage st, UniqueFd tree, const std::string& path, std::string subject) {
  add({.stage = st,
       .kind = StepKind::kMoveMount,
       .path = keep(path),
       .fd = tree.get(),
       .rel = beneathRoot(path)},
      "move_mount(root template)", std::move(subject));
  fds_.push_back(std::move(tree));
}

void Plan::setAttr(Stage st, const std::string& path, uint64_t attrs, bool recursive,
                   std::string subject) {
  add({.stage = st,
       .kind = StepKind::kSetAttr,
       .path = keep(path),
       .flags = static_cast<unsigned long>(attrs),
       .mode = recursive ? 1u : 0u,
       .rel = beneathRoot(path)},
      "mount_setattr(read-only)", std::move(subject));
}

std::string Plan::describe(const FailureRecord& record) const {
  auto stage = static_cast<Stage>(record.stage);
  std::string context = std::string("stage ") + stageName(stage);
  if (record.step >= steps_.size()) {
    return Error("unknown step " + std::to_string(record.step), {}, record.err)
        .wrap(context)
        .message();
  }
  // openBeneath's refusals, said in words: ELOOP alone reads like a kernel limit.
  const Step& step = steps_[record.step];
  if ((step.rel != nullptr || step.source_rel != nullptr) &&
      (record.err == ELOOP || record.err == EXDEV)) {
    std::string why = record.err == ELOOP
                          ? "a symlink on the way, refused (never followed inside the new root)"
                          : "the path leaves the new root, refused";
    return Error(ops_[record.step] + " '" + subjects_[record.step] + "': " + why, {}, record.err)
        .wrap(context)
        .message();
  }
  return Error(ops_[record.step], subjects_[record.step], record.err).wrap(context).message();
}

}  // namespace airlock::isolation
