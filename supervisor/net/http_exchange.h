// One HTTP request to an operator's service (the webhook reviewer, the audit webhooks): resolve,
// connect, write, read, each step started by the one before; the caller fills `request`, bounds
// `parser`'s body, and runs the io_context until `done` or its deadline. `step` names the step
// an error happened in, for the caller's message.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>

#include "airlock/policy/review.h"

namespace airlock::net {

struct HttpExchange {
  using ErrorCode = boost::system::error_code;

  explicit HttpExchange(boost::asio::io_context& ioc) : resolver(ioc), stream(ioc) {}
  boost::asio::ip::tcp::resolver resolver;
  boost::beast::tcp_stream stream;
  boost::beast::flat_buffer buffer;
  boost::beast::http::request<boost::beast::http::string_body> request;
  boost::beast::http::response_parser<boost::beast::http::string_body> parser;
  std::string step = "resolving";
  ErrorCode error;
  bool done = false;

  void failAt(const ErrorCode& ec) {
    error = ec;
    done = true;
  }
  void start(const policy::WebhookUrl& url) {
    namespace http = boost::beast::http;
    resolver.async_resolve(
        url.host, std::to_string(url.port),
        [this](const ErrorCode& ec, const boost::asio::ip::tcp::resolver::results_type& r) {
          if (ec) return failAt(ec);
          step = "connecting to";
          stream.async_connect(r, [this](const ErrorCode& ec2, auto) {
            if (ec2) return failAt(ec2);
            step = "sending to";
            http::async_write(stream, request, [this](const ErrorCode& ec3, size_t) {
              if (ec3) return failAt(ec3);
              step = "reading the answer of";
              http::async_read(stream, buffer, parser, [this](const ErrorCode& ec4, size_t) {
                if (ec4) return failAt(ec4);
                done = true;
              });
            });
          });
        });
  }
};

}  // namespace airlock::net
