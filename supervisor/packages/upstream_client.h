// GET requests to the operator's upstream (a PyPI index, an npm registry, the hosts their
// files live on), over http or https (TLS always verifies the peer and its name).
//
// Why asynchronous operations on a private io_context rather than Beast's sync calls: Asio's
// sync socket calls cannot time out, and a sandbox's Attachment must be able to end a stalled
// download at once. Each request runs its own io_context to completion on the calling thread,
// with timeout_s as the connect and no-progress deadline, and ends early when `stop_fd` (an
// eventfd) becomes readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/result.h"

namespace airlock::packages {

struct UpstreamHeader {
  unsigned status = 0;
  std::string content_type;
  std::optional<uint64_t> content_length;
  std::string url;  // the URL that answered, after redirects
};

struct FetchError {
  enum class Kind {
    transport,  // DNS, connect, TLS, timeout, a broken response: the proxy answers 502
    callback,   // a callback refused (its message as it wrote it)
    stopped,    // stop_fd fired
  };
  Kind kind = Kind::transport;
  std::string message;  // transport errors name the upstream: "upstream 'pypi.org:443': ..."
};

template <typename T>
using FetchResult = std::expected<T, FetchError>;

class UpstreamClient {
 public:
  // Loads the CA bundle now, so a bad ca_file fails Proxy::create, not the first download.
  static Result<std::shared_ptr<UpstreamClient>> create(const std::string& ca_file,
                                                        std::chrono::seconds timeout);
  ~UpstreamClient();

  using HeaderCallback = std::function<std::optional<std::string>(const UpstreamHeader&)>;
  using DataCallback = std::function<std::optional<std::string>(std::string_view)>;

  // GETs `url`, following up to 5 redirects. For the final answer, calls on_header (a message
  // stops it: Kind::callback); then, for a 2xx answer only, on_data per chunk of the body.
  // Returns the final header. One request per connection (Connection: close).
  FetchResult<UpstreamHeader> get(const std::string& url, std::string_view accept, int stop_fd,
                                  const HeaderCallback& on_header, const DataCallback& on_data);

  // A whole (2xx) body of at most max_bytes into memory; other statuses with an empty body.
  FetchResult<std::pair<UpstreamHeader, std::string>> getText(const std::string& url,
                                                              std::string_view accept, int stop_fd,
                                                              uint64_t max_bytes);

 private:
  struct Impl;
  explicit UpstreamClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::packages
