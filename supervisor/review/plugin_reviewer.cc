#include "supervisor/review/plugin_reviewer.h"
#include "airlock/error_from_text.h"

#include <cstring>

namespace airlock::review {

Result<std::unique_ptr<PluginReviewer>> PluginReviewer::create(plugin::Registry& registry,
                                                               const std::string& plugin_name,
                                                               const std::string& config_json) {
  registry.loadAll();
  std::vector<std::string> available;
  for (const plugin::PluginHandle& handle : registry.plugins()) {
    if (handle.kind() != AIRLOCK_PLUGIN_REVIEW) continue;
    available.push_back(handle.shortName());
    if (handle.shortName() != plugin_name && handle.name() != plugin_name) continue;
    if (handle.descriptor().ops == nullptr) {
      return fail("review plugin '" + handle.name() + "' (" + handle.path() +
                  ") was built for plugin ABI 1.1 and has no review ops");
    }
    auto instance = plugin::Instance::create(handle, config_json);
    if (!instance) {
      return Unexpected(std::move(instance.error()).wrap("review plugin '" + plugin_name + "'"));
    }
    std::unique_ptr<PluginReviewer> reviewer(new PluginReviewer());
    reviewer->ops_ = static_cast<const airlock_review_ops_v1*>(handle.descriptor().ops);
    reviewer->instance_ = std::move(*instance);
    reviewer->name_ = "plugin:" + plugin_name;
    reviewer->sees_transfers_ = handle.descriptor().abi_minor >= 9;
    return reviewer;
  }
  std::string names;
  for (const auto& n : available) names += (names.empty() ? "" : ", ") + n;
  return fail("no review plugin '" + plugin_name +
              "' (review plugins found: " + (names.empty() ? "none" : names) + ")");
}

Result<Verdict> PluginReviewer::review(const Subject& subject) {
  // A plugin built before ABI 1.9 knows code and commands only: a transfer is not its to judge.
  if (subject.kind == SubjectKind::kTransfer && !sees_transfers_) return allow();
  auto str = [](const std::string& s) { return airlock_str_v1{s.data(), s.size()}; };
  std::vector<const char*> argv;
  for (const auto& a : subject.argv) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  airlock_review_subject_v1 s{};
  s.struct_size = sizeof s;
  s.kind = subject.kind == SubjectKind::kCode      ? AIRLOCK_REVIEW_CODE
           : subject.kind == SubjectKind::kCommand ? AIRLOCK_REVIEW_COMMAND
                                                   : AIRLOCK_REVIEW_TRANSFER;
  const std::string details =
      subject.details.is_null()
          ? ""
          : subject.details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s.language = str(subject.language);
  s.text = str(subject.text);
  s.argv = subject.argv.empty() ? nullptr : argv.data();
  s.profile = str(subject.profile);
  s.tenant = str(subject.tenant);
  s.sandbox_id = str(subject.sandbox_id);
  s.details_json = str(details);
  airlock_review_verdict_v1 out{};
  out.struct_size = sizeof out;
  airlock_error_v1 err{};
  int rc;
  {
    std::lock_guard lock(mu_);
    rc = ops_->review(instance_->get(), &s, &out, &err);
  }
  if (rc != 0) {
    err.message[sizeof err.message - 1] = '\0';
    return Unexpected(errorFromText(name_ + ": " + err.message, rc));
  }
  out.rule[sizeof out.rule - 1] = '\0';
  out.reason[sizeof out.reason - 1] = '\0';
  Verdict v;
  switch (out.decision) {
    case AIRLOCK_REVIEW_ALLOW:
      v.decision = Decision::kAllow;
      break;
    case AIRLOCK_REVIEW_DENY:
      v.decision = Decision::kDeny;
      break;
    case AIRLOCK_REVIEW_HOLD:
      v.decision = Decision::kHold;
      break;
    default:
      return fail(name_ + " answered unknown decision " + std::to_string(out.decision));
  }
  v.rule = out.rule;
  v.reason = out.reason;
  return v;
}

}  // namespace airlock::review
