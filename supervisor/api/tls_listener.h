// TLS for the TCP listener of `airlock serve` (docs/api.md, Remote access).
//
// An in-process terminator, so the HTTP server stays exactly as it is for the Unix socket and
// loopback TCP: it accepts on the TCP listener, runs the TLS handshake (OpenSSL through
// Boost.Asio's ssl::stream, TLS 1.2 and 1.3 only), and hands each connection that completed it to
// the server as the plaintext end of a socketpair, labelled with the real peer address. Bytes are
// relayed both ways until either side ends.
//
// Bounded, so a handshake flood or a client that stops reading cannot pin memory:
// - at most `max_handshakes` handshakes at once (`max_handshakes_per_client` per address), each
//   cut at `handshake_timeout`; over a limit, a new connection is closed at once;
// - at most `max_connections` relayed connections (the server's own admission limits apply to
//   them too);
// - a relay whose write makes no progress for `io_timeout` ends its connection. Idle connections
//   are the server's to close (its idle and header timeouts), which ends the relay.
// With `client_ca_file`, a client must present a certificate that CA signed, or the handshake
// fails; the bearer token is still required on every request.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::api {

struct TlsOptions {
  std::string cert_file;       // PEM certificate chain (server.tls_cert)
  std::string key_file;        // PEM private key (server.tls_key)
  std::string client_ca_file;  // PEM CA bundle (server.tls_client_ca); "": no client certs
  size_t max_connections = 4096;
  size_t max_handshakes = 256;
  size_t max_handshakes_per_client = 32;
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds io_timeout{60000};
};

class TlsTerminator {
 public:
  // Receives each connection after its handshake: our plaintext socketpair end for the HTTP
  // server (non-blocking, close-on-exec) and the client's label ("tls 192.0.2.7").
  using Deliver = std::function<void(UniqueFd plaintext, std::string client)>;
  using Log = std::function<void(std::string_view)>;

  // Checks the certificate, key and CA (errors name the setting and file) and starts accepting
  // on `listener` (a bound, listening TCP socket it takes over).
  static Result<std::unique_ptr<TlsTerminator>> start(UniqueFd listener, TlsOptions options,
                                                      Deliver deliver, Log log);
  ~TlsTerminator();  // stop()
  TlsTerminator(const TlsTerminator&) = delete;
  TlsTerminator& operator=(const TlsTerminator&) = delete;

  // Closes the listener; connections already relayed go on.
  void stopAccepting();
  // Closes the listener and every connection, and joins the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  explicit TlsTerminator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::api
