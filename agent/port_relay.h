// Port streams (docs/protocol.md, "Ports"): TCP connections the agent makes to a port on the
// sandbox's own loopback and relays over the channel, so the supervisor can reach a server the
// sandbox runs without any network of its own (network "none" included): nothing is opened on
// the host, and the connection is made in the sandbox's network namespace (or the gVisor or
// microVM guest's stack) because the agent lives there.
//
// Flow control: each direction has a window of kPortWindow bytes. The agent reads its socket
// only while the supervisor's credit lasts, and returns credit for supervisor bytes only once
// they are written to the socket, so a stream never holds more than one window in the agent.
// The supervisor is trusted less than nothing here too: a frame that overruns its window ends
// the stream.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "airlock/protocol/messages.h"
#include "airlock/unique_fd.h"

namespace airlock::agent {

class PortRelay {
 public:
  // How the relay sends a frame to the supervisor (the agent's blocking, channel-draining send).
  using SendFrame = std::function<void(const std::string& frame)>;
  explicit PortRelay(SendFrame send) : send_(std::move(send)) {}

  // Frames from the supervisor, by request id.
  void open(uint32_t id, const std::string& payload);
  void data(uint32_t id, const std::string& payload);
  void credit(uint32_t id, const std::string& payload);
  void close(uint32_t id, const std::string& payload);

  // The poll set: one entry per stream that waits for something; `ids` gets the stream ids.
  void addPollFds(std::vector<pollfd>& fds, std::vector<uint32_t>& ids) const;
  // A polled socket is ready.
  void onReady(uint32_t id, short revents);
  // Closes every stream (the channel ended or the sandbox shuts down).
  void closeAll() { streams_.clear(); }
  size_t size() const { return streams_.size(); }

 private:
  struct Stream {
    uint32_t id = 0;
    uint16_t port = 0;
    UniqueFd sock;
    int family_index = 0;     // 0: 127.0.0.1, 1: [::1]
    bool connecting = false;  // a non-blocking connect is in progress
    std::string to_socket;    // supervisor bytes not yet written (at most one window)
    bool peer_eof = false;    // the supervisor half-closed: shut the socket's write side after
    bool write_shut = false;  // SHUT_WR done
    bool read_eof = false;    // the socket said EOF, and the supervisor was told
    uint32_t send_credit = protocol::kPortWindow;  // bytes the agent may still send
  };

  template <typename M>
  void sendMsg(uint32_t id, const M& m) {
    std::string frame;
    protocol::encode(frame, id, m);
    send_(frame);
  }
  void fail(uint32_t id, int errnum, const std::string& stage, const std::string& message);
  // Starts connecting to the next address; false when none is left.
  bool connectNext(Stream& s, int& last_errno);
  void finishConnect(Stream& s);
  void readSocket(Stream& s);
  void writeSocket(Stream& s);
  // Ends the stream when both directions are done.
  void maybeFinish(uint32_t id);
  void end(uint32_t id, int errnum);

  SendFrame send_;
  std::map<uint32_t, std::unique_ptr<Stream>> streams_;
  std::unique_ptr<char[]> buf_ = std::make_unique_for_overwrite<char[]>(protocol::kMaxChunk);
};

}  // namespace airlock::agent
