// The airlock plugin SDK for C++: write a class, add one macro, get a plugin.
//
//   class Python final : public airlock::sdk::LanguagePlugin {
//    public:
//     using LanguagePlugin::LanguagePlugin;
//     static constexpr const char* kAliases[] = {"py", nullptr};
//     ...
//     Command buildCommand(const airlock_code_request_v1& req) override { ... }
//   };
//   AIRLOCK_LANGUAGE_PLUGIN(Python, "airlock.language.python", "1.0.0")
//
// Review plugins derive from ReviewPlugin and use AIRLOCK_REVIEW_PLUGIN (plugins/review/example);
// transfer plugins derive from TransferPlugin and use AIRLOCK_TRANSFER_PLUGIN (plugins/transfer).
//
// The macro defines the airlock_plugin_v1 descriptor and exports it through Boost.DLL. Every
// call from the host goes through a noexcept trampoline that turns exceptions into an
// airlock_error_v1, so no C++ exception ever crosses the C ABI. Header-only: a plugin links
// nothing of airlock's.
#pragma once

#include <airlock/plugin_abi_v1.h>

// BOOST_DLL_ALIAS needs only a section attribute and an exported variable. Without this,
// boost/dll/config.hpp pulls in Boost.System, whose error categories are default-visibility
// classes: every plugin would export their vtables and typeinfo, and bind them against the
// host's copies.
#ifndef BOOST_DLL_USE_STD_FS
#define BOOST_DLL_USE_STD_FS
#endif
#include <boost/dll/alias.hpp>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::sdk {

// Throw from plugin code to fail a call with an errno value and a message.
class PluginError : public std::exception {
 public:
  PluginError(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

inline void setError(airlock_error_v1* err, int code, const char* message) noexcept {
  if (err == nullptr) return;
  err->code = code;
  std::snprintf(err->message, sizeof err->message, "%s", message);
}

class PluginBase {
 public:
  PluginBase(const airlock_host_v1* host, std::string_view config_json)
      : host_(host), config_json_(config_json) {}
  virtual ~PluginBase() = default;
  PluginBase(const PluginBase&) = delete;
  PluginBase& operator=(const PluginBase&) = delete;

  void log(int level, const std::string& message) const noexcept {
    if (host_ != nullptr && host_->log != nullptr) host_->log(host_->ctx, level, message.c_str());
  }
  const std::string& configJson() const { return config_json_; }

 private:
  const airlock_host_v1* host_;
  std::string config_json_;
};

// Isolation backends. start() throws PluginError on failure; release() must not fail.
class IsolationPlugin : public PluginBase {
 public:
  using PluginBase::PluginBase;
  static constexpr const char* const* kExtraSyscalls = nullptr;
  static constexpr uint32_t kFlags = 0;  // AIRLOCK_ISOLATION_* (ABI 1.5, 1.6)
  // The backend's own cost inside the sandbox's cgroup (ABI 1.5; airlock_isolation_ops_v1).
  static constexpr uint32_t kHostPidsBase = 0;
  static constexpr uint32_t kHostPidsPerProcess = 0;
  static constexpr uint64_t kHostMemoryBaseBytes = 0;
  virtual void start(const airlock_sandbox_spec_v1& spec, airlock_sandbox_v1& out) = 0;
  virtual void release(airlock_sandbox_v1& /*sandbox*/) noexcept {}
  // Backends flagged AIRLOCK_ISOLATION_OWN_AUDIT (ABI 1.6): hands every event received from the
  // sandbox so far to `emit`, without blocking. Throws PluginError when the monitoring broke.
  virtual void readEvents(airlock_sandbox_v1& /*sandbox*/,
                          const std::function<void(const airlock_sandbox_event_v1&)>& /*emit*/) {}
  // Backends whose agent is not a host process (ABI 1.10) set kAdopts and define adopt(): it
  // hands the waiting agent of a sandbox started for a dead supervisor a new channel and returns
  // the supervisor's end, filling out.handle and out.events_fd as start() does.
  static constexpr bool kAdopts = false;
  virtual int adopt(const airlock_adopt_spec_v1& /*spec*/, airlock_sandbox_v1& /*out*/) {
    throw PluginError(ENOTSUP, "this backend cannot adopt sandboxes");
  }
};

// Language runtimes. A derived class also defines the static members kAliases, kExtensions,
// kImagePaths (NULL-terminated arrays) and kMaxInlineBytes.
class LanguagePlugin : public PluginBase {
 public:
  using PluginBase::PluginBase;
  struct Command {
    std::vector<std::string> argv;
    std::vector<std::string> env;
  };
  // AIRLOCK_CODE_INLINE and AIRLOCK_CODE_FILE requests.
  virtual Command buildCommand(const airlock_code_request_v1& request) = 0;
  // AIRLOCK_CODE_SESSION requests: the command starting this language's session driver
  // (docs/plugins.md, "Session drivers"). Languages without one keep the default.
  virtual Command buildSession() {
    throw PluginError(ENOTSUP, "this language has no session driver");
  }
  // AIRLOCK_CODE_PRESTART requests (ABI 1.4): the command starting this language's prestart
  // driver, which imports `modules` and then waits for one program on stdin (docs/plugins.md,
  // "Prestart drivers"). Languages without one keep the default.
  virtual Command buildPrestart(const std::vector<std::string>& /*modules*/) {
    throw PluginError(ENOTSUP, "this language has no prestart driver");
  }
};

// Review plugins (ABI 1.2): one link of a profile's review chain. review() returns a Verdict, or
// throws PluginError when it cannot decide (the chain then fails closed unless the profile fails
// open). Called from any supervisor thread, one call at a time per instance.
class ReviewPlugin : public PluginBase {
 public:
  using PluginBase::PluginBase;
  enum class Decision {
    kAllow = AIRLOCK_REVIEW_ALLOW,
    kDeny = AIRLOCK_REVIEW_DENY,
    kHold = AIRLOCK_REVIEW_HOLD
  };
  struct Subject {
    bool is_command = false;
    bool is_transfer = false;            // ABI 1.9: a transfer (docs/transfer.md, "Review")
    std::string_view language;           // "python", "node", "shell"; "transfer"
    std::string_view text;               // the code, the command line, or the transfer's lines
    std::vector<std::string_view> argv;  // a command given as argv; empty otherwise
    std::string_view profile, tenant, sandbox_id;
    std::string_view details_json;  // a transfer as JSON; empty otherwise
  };
  struct Verdict {
    Decision decision = Decision::kAllow;
    std::string rule;    // cut to 127 bytes
    std::string reason;  // cut to 511 bytes
  };
  virtual Verdict review(const Subject& subject) = 0;
};

// Transfer plugins (ABI 1.8): where a transfer's bytes come from or go to. A derived class
// defines kPrefixes (the locations it takes, NULL-terminated; "" for local paths) and open(),
// which checks the request against its rules and returns the fd the host reads (IN) or writes
// (OUT), with a Stream that finishes the transfer. Called from any supervisor thread, several
// transfers at once.
class TransferPlugin : public PluginBase {
 public:
  using PluginBase::PluginBase;
  enum class Direction { kIn = AIRLOCK_TRANSFER_IN, kOut = AIRLOCK_TRANSFER_OUT };
  struct Request {
    Direction direction = Direction::kIn;
    std::string_view location;    // as the user named it
    std::string_view rules_json;  // the profile's rules for this plugin (docs/transfer.md)
    uint64_t max_bytes = 0;
    std::string_view tenant, sandbox_id;
  };
  // One open transfer. finish() runs after the host closed the fd: ok = true, complete it (an
  // upload's last byte, a file moved into place) or throw PluginError naming what failed (a
  // download cut short); ok = false, discard anything partial and never throw.
  class Stream {
   public:
    virtual ~Stream() = default;
    virtual void finish(bool ok) = 0;
  };
  struct Opened {
    int fd = -1;                     // handed to the host, which closes it
    std::string format;              // OUT: "tar", "tar.gz", "tar.zst" or "zip"
    std::string display;             // the location without credentials
    uint64_t size = 0;               // IN: bytes to come, when known
    std::unique_ptr<Stream> stream;  // null: nothing to finish
  };
  virtual Opened open(const Request& request) = 0;
};

namespace detail {

template <typename Fn>
int guard(airlock_error_v1* err, Fn&& fn) noexcept {
  try {
    fn();
    return 0;
  } catch (const PluginError& e) {
    setError(err, e.code() != 0 ? e.code() : EINVAL, e.what());
    return e.code() != 0 ? e.code() : EINVAL;
  } catch (const std::bad_alloc&) {
    setError(err, ENOMEM, "out of memory");
    return ENOMEM;
  } catch (const std::exception& e) {
    setError(err, EINVAL, e.what());
    return EINVAL;
  } catch (...) {
    setError(err, EINVAL, "unknown exception in plugin");
    return EINVAL;
  }
}

template <typename P>
void* create(const airlock_host_v1* host, const char* config_json, airlock_error_v1* err) noexcept {
  P* instance = nullptr;
  guard(err, [&] { instance = new P(host, config_json != nullptr ? config_json : "{}"); });
  return instance;
}

template <typename P>
void destroy(void* instance) noexcept {
  delete static_cast<P*>(instance);
}

template <typename P>
struct IsolationTrampolines {
  static int start(void* instance, const airlock_sandbox_spec_v1* spec, airlock_sandbox_v1* out,
                   airlock_error_v1* err) noexcept {
    if (spec == nullptr || out == nullptr || spec->struct_size < sizeof(airlock_sandbox_spec_v1)) {
      setError(err, EINVAL, "start: spec or output missing, or spec struct_size too small");
      return EINVAL;
    }
    return guard(err, [&] { static_cast<P*>(instance)->start(*spec, *out); });
  }
  static void release(void* instance, airlock_sandbox_v1* sandbox) noexcept {
    if (sandbox != nullptr) static_cast<P*>(instance)->release(*sandbox);
  }
  static int readEvents(void* instance, airlock_sandbox_v1* sandbox,
                        void (*emit)(void*, const airlock_sandbox_event_v1*),
                        void* emit_ctx) noexcept {
    if (sandbox == nullptr || emit == nullptr) return EINVAL;
    airlock_error_v1 err{};
    return guard(&err, [&] {
      static_cast<P*>(instance)->readEvents(
          *sandbox, [&](const airlock_sandbox_event_v1& event) { emit(emit_ctx, &event); });
    });
  }
  static int adopt(void* instance, const airlock_adopt_spec_v1* spec, airlock_sandbox_v1* out,
                   int* channel_fd, airlock_error_v1* err) noexcept {
    if (spec == nullptr || out == nullptr || channel_fd == nullptr ||
        spec->struct_size < sizeof(airlock_adopt_spec_v1)) {
      setError(err, EINVAL, "adopt: spec or output missing, or spec struct_size too small");
      return EINVAL;
    }
    *channel_fd = -1;
    return guard(err, [&] { *channel_fd = static_cast<P*>(instance)->adopt(*spec, *out); });
  }
  static constexpr airlock_isolation_ops_v1 ops = {
      sizeof(airlock_isolation_ops_v1),
      &start,
      &release,
      P::kExtraSyscalls,
      P::kFlags,
      P::kHostPidsBase,
      P::kHostPidsPerProcess,
      P::kHostMemoryBaseBytes,
      (P::kFlags & AIRLOCK_ISOLATION_OWN_AUDIT) != 0 ? &readEvents : nullptr,
      P::kAdopts ? &adopt : nullptr};
};

template <typename P>
struct LanguageTrampolines {
  // The strings the host reads between build_command() and free_command().
  struct Owned {
    LanguagePlugin::Command command;
    std::vector<const char*> argv;
    std::vector<const char*> env;
  };
  static int build(void* instance, const airlock_code_request_v1* request, airlock_command_v1* out,
                   airlock_error_v1* err) noexcept {
    if (request == nullptr || out == nullptr ||
        request->struct_size < sizeof(airlock_code_request_v1)) {
      setError(err, EINVAL, "build_command: request or output missing, or struct_size too small");
      return EINVAL;
    }
    return guard(err, [&] {
      auto owned = std::make_unique<Owned>();
      P* plugin = static_cast<P*>(instance);
      if (request->source == AIRLOCK_CODE_SESSION) {
        owned->command = plugin->buildSession();
      } else if (request->source == AIRLOCK_CODE_PRESTART) {
        std::vector<std::string> modules;
        for (const char* const* m = request->args; m != nullptr && *m != nullptr; ++m)
          modules.emplace_back(*m);
        owned->command = plugin->buildPrestart(modules);
      } else {
        owned->command = plugin->buildCommand(*request);
      }
      for (auto& a : owned->command.argv) owned->argv.push_back(a.c_str());
      owned->argv.push_back(nullptr);
      for (auto& e : owned->command.env) owned->env.push_back(e.c_str());
      owned->env.push_back(nullptr);
      out->struct_size = sizeof(airlock_command_v1);
      out->argv = owned->argv.data();
      out->env = owned->env.data();
      out->plugin_data = owned.release();
    });
  }
  static void release(void* /*instance*/, airlock_command_v1* command) noexcept {
    if (command != nullptr) delete static_cast<Owned*>(command->plugin_data);
  }
  static constexpr airlock_language_ops_v1 ops = {sizeof(airlock_language_ops_v1),
                                                  P::kAliases,
                                                  P::kExtensions,
                                                  P::kImagePaths,
                                                  P::kMaxInlineBytes,
                                                  &build,
                                                  &release};
};

template <typename P>
struct ReviewTrampolines {
  static std::string_view view(airlock_str_v1 s) {
    return s.ptr == nullptr ? std::string_view() : std::string_view(s.ptr, s.len);
  }
  static int review(void* instance, const airlock_review_subject_v1* subject,
                    airlock_review_verdict_v1* out, airlock_error_v1* err) noexcept {
    if (subject == nullptr || out == nullptr ||
        subject->struct_size < offsetof(airlock_review_subject_v1, details_json) ||
        out->struct_size < sizeof(airlock_review_verdict_v1)) {
      setError(err, EINVAL, "review: subject or verdict missing, or struct_size too small");
      return EINVAL;
    }
    return guard(err, [&] {
      ReviewPlugin::Subject s;
      s.is_command = subject->kind == AIRLOCK_REVIEW_COMMAND;
      s.is_transfer = subject->kind == AIRLOCK_REVIEW_TRANSFER;
      s.language = view(subject->language);
      s.text = view(subject->text);
      for (const char* const* a = subject->argv; a != nullptr && *a != nullptr; ++a) {
        s.argv.emplace_back(*a);
      }
      s.profile = view(subject->profile);
      s.tenant = view(subject->tenant);
      s.sandbox_id = view(subject->sandbox_id);
      if (subject->struct_size >= sizeof(airlock_review_subject_v1))
        s.details_json = view(subject->details_json);
      ReviewPlugin::Verdict v = static_cast<P*>(instance)->review(s);
      out->decision = static_cast<int>(v.decision);
      std::snprintf(out->rule, sizeof out->rule, "%s", v.rule.c_str());
      std::snprintf(out->reason, sizeof out->reason, "%s", v.reason.c_str());
    });
  }
  static constexpr airlock_review_ops_v1 ops = {sizeof(airlock_review_ops_v1), &review};
};

template <typename P>
struct TransferTrampolines {
  static int open(void* instance, const airlock_transfer_request_v1* request,
                  airlock_transfer_v1* out, airlock_error_v1* err) noexcept {
    if (request == nullptr || out == nullptr ||
        request->struct_size < sizeof(airlock_transfer_request_v1) ||
        out->struct_size < sizeof(airlock_transfer_v1)) {
      setError(err, EINVAL, "open: request or output missing, or struct_size too small");
      return EINVAL;
    }
    return guard(err, [&] {
      auto str = [](const char* s) { return s == nullptr ? std::string_view() : s; };
      TransferPlugin::Request r;
      r.direction = static_cast<TransferPlugin::Direction>(request->direction);
      r.location = str(request->location);
      r.rules_json = request->rules_json == nullptr ? std::string_view("{}") : request->rules_json;
      r.max_bytes = request->max_bytes;
      r.tenant = str(request->tenant);
      r.sandbox_id = str(request->sandbox_id);
      TransferPlugin::Opened o = static_cast<P*>(instance)->open(r);
      if (o.fd < 0) throw PluginError(EINVAL, "open() returned no fd");
      out->fd = o.fd;
      std::snprintf(out->format, sizeof out->format, "%s", o.format.c_str());
      std::snprintf(out->display, sizeof out->display, "%s", o.display.c_str());
      out->size = o.size;
      out->handle = o.stream.release();
    });
  }
  static int close(void* /*instance*/, airlock_transfer_v1* transfer, int ok,
                   airlock_error_v1* err) noexcept {
    if (transfer == nullptr) return EINVAL;
    std::unique_ptr<TransferPlugin::Stream> stream(
        static_cast<TransferPlugin::Stream*>(transfer->handle));
    transfer->handle = nullptr;
    if (!stream) return 0;
    if (ok == 0) {
      try {
        stream->finish(false);
      } catch (...) {
      }
      return 0;
    }
    return guard(err, [&] { stream->finish(true); });
  }
  static constexpr airlock_transfer_ops_v1 ops = {sizeof(airlock_transfer_ops_v1), P::kPrefixes,
                                                  &open, &close};
};

}  // namespace detail
}  // namespace airlock::sdk

// Defines the plugin descriptor and exports the entry point AIRLOCK_PLUGIN_ENTRY_SYMBOL.
// Use once per shared library, at namespace scope.
#define AIRLOCK_PLUGIN(Class, kind_value, ops_pointer, plugin_name, plugin_version)              \
  namespace {                                                                                    \
  const airlock_plugin_v1 airlock_plugin_descriptor_ = {sizeof(airlock_plugin_v1),               \
                                                        AIRLOCK_PLUGIN_ABI_MAJOR,                \
                                                        AIRLOCK_PLUGIN_ABI_MINOR,                \
                                                        plugin_name,                             \
                                                        plugin_version,                          \
                                                        kind_value,                              \
                                                        &::airlock::sdk::detail::create<Class>,  \
                                                        &::airlock::sdk::detail::destroy<Class>, \
                                                        ops_pointer};                            \
  const airlock_plugin_v1* airlock_plugin_entry_impl_() { return &airlock_plugin_descriptor_; }  \
  }                                                                                              \
  BOOST_DLL_ALIAS(airlock_plugin_entry_impl_, airlock_plugin_entry_v1)

#define AIRLOCK_ISOLATION_PLUGIN(Class, plugin_name, plugin_version)                     \
  AIRLOCK_PLUGIN(Class, AIRLOCK_PLUGIN_ISOLATION,                                        \
                 &::airlock::sdk::detail::IsolationTrampolines<Class>::ops, plugin_name, \
                 plugin_version)

#define AIRLOCK_LANGUAGE_PLUGIN(Class, plugin_name, plugin_version)                     \
  AIRLOCK_PLUGIN(Class, AIRLOCK_PLUGIN_LANGUAGE,                                        \
                 &::airlock::sdk::detail::LanguageTrampolines<Class>::ops, plugin_name, \
                 plugin_version)

#define AIRLOCK_REVIEW_PLUGIN(Class, plugin_name, plugin_version)                     \
  AIRLOCK_PLUGIN(Class, AIRLOCK_PLUGIN_REVIEW,                                        \
                 &::airlock::sdk::detail::ReviewTrampolines<Class>::ops, plugin_name, \
                 plugin_version)

#define AIRLOCK_TRANSFER_PLUGIN(Class, plugin_name, plugin_version)                     \
  AIRLOCK_PLUGIN(Class, AIRLOCK_PLUGIN_TRANSFER,                                        \
                 &::airlock::sdk::detail::TransferTrampolines<Class>::ops, plugin_name, \
                 plugin_version)
