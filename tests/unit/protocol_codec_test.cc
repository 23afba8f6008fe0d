// Round trips of every agent channel message and every validation failure with its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <string>

#include "airlock/protocol/messages.h"
#include "protocol_test_util.h"

namespace airlock::protocol {
namespace {

using testing::field;
using ::testing::HasSubstr;
using testing::header;
using testing::u32Field;
using testing::u64Field;

template <typename M>
std::pair<FrameHeader, std::string> encodeFrame(uint32_t id, const M& m) {
  std::string out = "prefix";  // encode appends; what was there stays
  encode(out, id, m);
  EXPECT_EQ(out.substr(0, 6), "prefix");
  std::string frame = out.substr(6);
  auto h = decodeHeader(frame);
  EXPECT_TRUE(h.has_value()) << h.error().message();
  EXPECT_EQ(h->request_id, id);
  EXPECT_EQ(h->flags, 0);
  EXPECT_EQ(h->payload_len, frame.size() - kHeaderSize);
  return {*h, frame.substr(kHeaderSize)};
}

template <typename R>
std::string errorOf(const R& r) {
  EXPECT_FALSE(r.has_value()) << "decoding unexpectedly succeeded";
  return r.has_value() ? std::string() : r.error().message();
}

TEST(ProtocolCodec, HelloRoundTrip) {
  Hello m;
  m.agent_version = "0.1.0";
  m.agent_pid = 1;
  auto [h, p] = encodeFrame(0, m);
  EXPECT_EQ(h.type, MsgType::kHello);
  auto d = decodeHello(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->protocol_version, kProtocolVersion);
  EXPECT_EQ(d->agent_version, "0.1.0");
  EXPECT_EQ(d->agent_pid, 1u);
}

TEST(ProtocolCodec, ConfigureRoundTrip) {
  Configure m;
  m.uid = 1234;
  m.gid = 5678;
  m.keep_caps = (1ull << 40) | 3;
  m.seccomp_bpf = std::string(16, '\x7f');
  m.rlimits = {{7, 64, 128}, {1, ~0ull, ~0ull}};
  m.writable_paths = {"/home/user", "/tmp"};
  m.landlock = false;
  m.max_output_bytes_total = 1ull << 33;
  auto [h, p] = encodeFrame(7, m);
  EXPECT_EQ(h.type, MsgType::kConfigure);
  auto d = decodeConfigure(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->uid, 1234u);
  EXPECT_EQ(d->gid, 5678u);
  EXPECT_EQ(d->keep_caps, m.keep_caps);
  EXPECT_EQ(d->seccomp_bpf, m.seccomp_bpf);
  ASSERT_EQ(d->rlimits.size(), 2u);
  EXPECT_EQ(d->rlimits[0].resource, 7u);
  EXPECT_EQ(d->rlimits[0].soft, 64u);
  EXPECT_EQ(d->rlimits[0].hard, 128u);
  EXPECT_EQ(d->rlimits[1].soft, ~0ull);
  EXPECT_EQ(d->writable_paths, m.writable_paths);
  EXPECT_FALSE(d->landlock);
  EXPECT_EQ(d->max_output_bytes_total, 1ull << 33);
}

TEST(ProtocolCodec, ExecRoundTrip) {
  Exec m;
  m.argv = {"/usr/bin/python3", "-c", "print('hi')", ""};
  m.env = {"PATH=/usr/bin", "EMPTY="};
  m.cwd = "/work";
  m.timeout_ms = 1500;
  m.stdout_cap = 1 << 20;
  m.stderr_cap = 4096;
  m.stdin_pipe = true;
  m.control_pipe = true;
  m.kill_scope = ExecKillScope::kSession;
  auto [h, p] = encodeFrame(42, m);
  EXPECT_EQ(h.type, MsgType::kExec);
  auto d = decodeExec(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->argv, m.argv);
  EXPECT_EQ(d->env, m.env);
  EXPECT_EQ(d->cwd, "/work");
  EXPECT_EQ(d->timeout_ms, 1500u);
  EXPECT_EQ(d->stdout_cap, 1u << 20);
  EXPECT_EQ(d->stderr_cap, 4096u);
  EXPECT_TRUE(d->stdin_pipe);
  EXPECT_TRUE(d->control_pipe);
  EXPECT_EQ(d->kill_scope, ExecKillScope::kSession);
}

TEST(ProtocolCodec, ExecDefaultsWhenOptionalFieldsAbsent) {
  auto d = decodeExec(field(1, "/bin/true"));
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->cwd, "/home/user");
  EXPECT_EQ(d->timeout_ms, 0u);
  EXPECT_FALSE(d->stdin_pipe);
  EXPECT_FALSE(d->control_pipe);
  EXPECT_EQ(d->kill_scope, ExecKillScope::kAll);
  EXPECT_TRUE(d->env.empty());
}

TEST(ProtocolCodec, StdinSignalOutputRoundTrip) {
  Stdin s{std::string("a\0b", 3), true};
  auto [h1, p1] = encodeFrame(3, s);
  EXPECT_EQ(h1.type, MsgType::kStdin);
  auto ds = decodeStdin(p1);
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds->data, std::string("a\0b", 3));
  EXPECT_TRUE(ds->eof);

  auto [h2, p2] = encodeFrame(3, Signal{15});
  EXPECT_EQ(h2.type, MsgType::kSignal);
  auto dg = decodeSignal(p2);
  ASSERT_TRUE(dg);
  EXPECT_EQ(dg->signo, 15);

  Output o{Stream::kStderr, std::string(kMaxChunk, 'x')};
  auto [h3, p3] = encodeFrame(3, o);
  EXPECT_EQ(h3.type, MsgType::kOutput);
  auto d_o = decodeOutput(p3);
  ASSERT_TRUE(d_o);
  EXPECT_EQ(d_o->stream, Stream::kStderr);
  EXPECT_EQ(d_o->data, o.data);

  auto [h4, p4] = encodeFrame(3, Output{Stream::kControl, "{\"done\": 1}\n"});
  auto dc = decodeOutput(p4);
  ASSERT_TRUE(dc) << dc.error().message();
  EXPECT_EQ(dc->stream, Stream::kControl);
  EXPECT_EQ(dc->data, "{\"done\": 1}\n");
}

TEST(ProtocolCodec, ExitedRoundTrip) {
  Exited m{-1, 9, true, true, false, 5u << 20, 17, 123456, 1000, 2000, 4096, 1ull << 31, true, 3};
  auto [h, p] = encodeFrame(9, m);
  EXPECT_EQ(h.type, MsgType::kExited);
  auto d = decodeExited(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->exit_code, -1);
  EXPECT_EQ(d->signal, 9);
  EXPECT_TRUE(d->timed_out);
  EXPECT_TRUE(d->stdout_truncated);
  EXPECT_FALSE(d->stderr_truncated);
  EXPECT_EQ(d->stdout_bytes, 5u << 20);
  EXPECT_EQ(d->stderr_bytes, 17u);
  EXPECT_EQ(d->wall_us, 123456u);
  EXPECT_EQ(d->user_us, 1000u);
  EXPECT_EQ(d->sys_us, 2000u);
  EXPECT_EQ(d->max_rss_kb, 4096u);
  EXPECT_EQ(d->control_bytes, 1ull << 31);
  EXPECT_TRUE(d->control_truncated);
  EXPECT_EQ(d->oom_kills, 3u);
}

TEST(ProtocolCodec, StartedRoundTrip) {
  auto [h, p] = encodeFrame(12, Started{4242});
  EXPECT_EQ(h.type, MsgType::kStarted);
  auto d = decodeStarted(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->pid, 4242u);
}

TEST(ProtocolCodec, FileRequestsRoundTrip) {
  auto [h1, p1] = encodeFrame(20, FileList{"/home/user"});
  EXPECT_EQ(h1.type, MsgType::kFileList);
  auto dl = decodeFileList(p1);
  ASSERT_TRUE(dl) << dl.error().message();
  EXPECT_EQ(dl->path, "/home/user");

  auto [h2, p2] = encodeFrame(21, FileStat{"/home/user/a b"});
  EXPECT_EQ(h2.type, MsgType::kFileStat);
  auto ds = decodeFileStat(p2);
  ASSERT_TRUE(ds) << ds.error().message();
  EXPECT_EQ(ds->path, "/home/user/a b");

  auto [h3, p3] = encodeFrame(22, FileMkdir{"/home/user/x/y", true, 0700});
  EXPECT_EQ(h3.type, MsgType::kFileMkdir);
  auto dm = decodeFileMkdir(p3);
  ASSERT_TRUE(dm) << dm.error().message();
  EXPECT_EQ(dm->path, "/home/user/x/y");
  EXPECT_TRUE(dm->parents);
  EXPECT_EQ(dm->mode, 0700u);
  auto dm_default = decodeFileMkdir(field(1, "/d"));
  ASSERT_TRUE(dm_default);
  EXPECT_FALSE(dm_default->parents);
  EXPECT_EQ(dm_default->mode, 0755u);

  auto [h4, p4] = encodeFrame(23, FileRemove{"/home/user/x", true});
  EXPECT_EQ(h4.type, MsgType::kFileRemove);
  auto dr = decodeFileRemove(p4);
  ASSERT_TRUE(dr) << dr.error().message();
  EXPECT_EQ(dr->path, "/home/user/x");
  EXPECT_TRUE(dr->recursive);

  auto [h5, p5] = encodeFrame(24, FileRename{"/home/user/a", "/tmp/b"});
  EXPECT_EQ(h5.type, MsgType::kFileRename);
  auto dn = decodeFileRename(p5);
  ASSERT_TRUE(dn) << dn.error().message();
  EXPECT_EQ(dn->from, "/home/user/a");
  EXPECT_EQ(dn->to, "/tmp/b");
}

TEST(ProtocolCodec, PortMessagesRoundTripAndRejectBadValues) {
  auto [h1, p1] = encodeFrame(40, PortOpen{8000});
  EXPECT_EQ(h1.type, MsgType::kPortOpen);
  EXPECT_EQ(h1.request_id, 40u);
  ASSERT_TRUE(decodePortOpen(p1));
  EXPECT_EQ(decodePortOpen(p1)->port, 8000u);
  auto [h2, p2] = encodeFrame(40, PortData{std::string("a\0b", 3), true});
  EXPECT_EQ(h2.type, MsgType::kPortData);
  auto d = decodePortData(p2);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->data, std::string("a\0b", 3));
  EXPECT_TRUE(d->eof);
  auto [h3, p3] = encodeFrame(40, PortCredit{kPortWindow});
  EXPECT_EQ(h3.type, MsgType::kPortCredit);
  EXPECT_EQ(decodePortCredit(p3)->bytes, kPortWindow);
  auto [h4, p4] = encodeFrame(40, PortClose{ECONNRESET});
  EXPECT_EQ(h4.type, MsgType::kPortClose);
  EXPECT_EQ(decodePortClose(p4)->errnum, ECONNRESET);
  EXPECT_STREQ(msgTypeName(MsgType::kPortClose), "PortClose");

  auto bad_port = decodePortOpen(encodeFrame(1, PortOpen{65536}).second);
  ASSERT_FALSE(bad_port);
  EXPECT_THAT(bad_port.error().message(),
              ::testing::HasSubstr("PortOpen: field 'port' (tag 1): port 65536 outside 1..65535"));
  EXPECT_FALSE(decodePortOpen(encodeFrame(1, PortOpen{0}).second));
  EXPECT_FALSE(decodePortOpen(""));  // port is required
  EXPECT_FALSE(decodePortCredit(encodeFrame(1, PortCredit{0}).second));
  auto big_credit = decodePortCredit(encodeFrame(1, PortCredit{kPortWindow + 1}).second);
  ASSERT_FALSE(big_credit);
  EXPECT_THAT(big_credit.error().message(), ::testing::HasSubstr("outside 1..262144"));
  EXPECT_FALSE(decodePortData(encodeFrame(1, PortData{std::string(kMaxChunk + 1, 'x')}).second));
  EXPECT_FALSE(decodePortClose(encodeFrame(1, PortClose{-1}).second));
}

TEST(ProtocolCodec, FileEntriesRoundTrip) {
  FileEntries m;
  m.entries = {{"a.txt", FileType::kFile, 1ull << 40, 0644, 1700000000123},
               {"dir", FileType::kDir, 4096, 01777, -5},
               {"link", FileType::kSymlink, 11, 0777, 0},
               {std::string(255, 'n'), FileType::kOther, 0, 0, 1}};
  m.last = false;
  auto [h, p] = encodeFrame(30, m);
  EXPECT_EQ(h.type, MsgType::kFileEntries);
  size_t expected = 7;  // the last field
  for (const auto& e : m.entries) expected += encodedEntrySize(e);
  EXPECT_EQ(p.size(), expected);
  auto d = decodeFileEntries(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_FALSE(d->last);
  ASSERT_EQ(d->entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d->entries[i].name, m.entries[i].name);
    EXPECT_EQ(d->entries[i].type, m.entries[i].type);
    EXPECT_EQ(d->entries[i].size, m.entries[i].size);
    EXPECT_EQ(d->entries[i].mode, m.entries[i].mode);
    EXPECT_EQ(d->entries[i].mtime_ms, m.entries[i].mtime_ms);
  }
  auto empty = decodeFileEntries("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->entries.empty());
  EXPECT_TRUE(empty->last);
  // Unknown fields inside an entry are skipped like message fields.
  auto future = decodeFileEntries(field(1, field(1, "x") + field(2, "\x01") + field(9, "new")));
  ASSERT_TRUE(future) << future.error().message();
  EXPECT_EQ(future->entries[0].name, "x");
}

TEST(ProtocolCodec, ErrorAndFileMessagesRoundTrip) {
  auto [h1, p1] = encodeFrame(5, ErrorMsg{2, "exec", "execve '/x': ENOENT"});
  EXPECT_EQ(h1.type, MsgType::kError);
  auto de = decodeError(p1);
  ASSERT_TRUE(de);
  EXPECT_EQ(de->errnum, 2);
  EXPECT_EQ(de->stage, "exec");
  EXPECT_EQ(de->message, "execve '/x': ENOENT");

  FileWrite w{"/home/user/a.txt", 0755, "data", false, true};
  auto [h2, p2] = encodeFrame(6, w);
  EXPECT_EQ(h2.type, MsgType::kFileWrite);
  auto dw = decodeFileWrite(p2);
  ASSERT_TRUE(dw);
  EXPECT_EQ(dw->path, w.path);
  EXPECT_EQ(dw->mode, 0755u);
  EXPECT_EQ(dw->data, "data");
  EXPECT_FALSE(dw->first);
  EXPECT_TRUE(dw->last);

  auto [h3, p3] = encodeFrame(7, FileRead{"/etc/hostname", 99});
  EXPECT_EQ(h3.type, MsgType::kFileRead);
  auto dr = decodeFileRead(p3);
  ASSERT_TRUE(dr);
  EXPECT_EQ(dr->path, "/etc/hostname");
  EXPECT_EQ(dr->max_bytes, 99u);

  auto [h4, p4] = encodeFrame(7, FileData{"chunk", false, 1000});
  EXPECT_EQ(h4.type, MsgType::kFileData);
  auto dd = decodeFileData(p4);
  ASSERT_TRUE(dd);
  EXPECT_EQ(dd->data, "chunk");
  EXPECT_FALSE(dd->last);
  EXPECT_EQ(dd->size, 1000u);

  auto [h5, p5] = encodeFrame(8, Shutdown{});
  EXPECT_EQ(h5.type, MsgType::kShutdown);
  EXPECT_TRUE(p5.empty());
  auto [h6, p6] = encodeFrame(8, Ok{});
  EXPECT_EQ(h6.type, MsgType::kOk);
  EXPECT_TRUE(p6.empty());
  auto [h7, p7] = encodeFrame(8, Reattach{});
  EXPECT_EQ(h7.type, MsgType::kReattach);
  EXPECT_STREQ(msgTypeName(h7.type), "Reattach");
  EXPECT_TRUE(p7.empty());
}

// Reattached: what a dead supervisor left, as the agent tells the next one.
TEST(ProtocolCodec, ReattachedRoundTripAndBadItems) {
  Reattached m;
  m.last_request_id = 41;
  m.ended = {{7, 12, -1, 9, false}, {41, 30, 3, 0, true}};
  auto [h, p] = encodeFrame(1, m);
  EXPECT_EQ(h.type, MsgType::kReattached);
  EXPECT_STREQ(msgTypeName(h.type), "Reattached");
  auto d = decodeReattached(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->last_request_id, 41u);
  ASSERT_EQ(d->ended.size(), 2u);
  EXPECT_EQ(d->ended[0].request_id, 7u);
  EXPECT_EQ(d->ended[0].pid, 12u);
  EXPECT_EQ(d->ended[0].signal, 9);
  EXPECT_FALSE(d->ended[0].code_context);
  EXPECT_EQ(d->ended[1].exit_code, 3);
  EXPECT_EQ(d->ended[1].signal, 0);
  EXPECT_TRUE(d->ended[1].code_context);
  ASSERT_TRUE(decodeReattached(""));  // nothing was running, no request ever made

  // A hostile agent cannot make the supervisor invent ids it never used, or odd statuses.
  auto item = [](uint32_t id, uint32_t signal, uint32_t flags) {
    Reattached r;
    r.last_request_id = 10;
    r.ended = {{id, 1, 0, static_cast<int32_t>(signal), false}};
    std::string out;
    encode(out, 1, r);
    std::string payload = out.substr(kHeaderSize);
    // flags are the item's last 4 bytes, at the end of the payload
    for (int i = 0; i < 4; ++i)
      payload[payload.size() - 4 + i] = static_cast<char>((flags >> (8 * i)) & 0xff);
    return payload;
  };
  EXPECT_THAT(errorOf(decodeReattached(item(0, 9, 0))), HasSubstr("request id 0 is not one"));
  EXPECT_THAT(errorOf(decodeReattached(item(11, 9, 0))), HasSubstr("(1..10)"));
  EXPECT_THAT(errorOf(decodeReattached(item(5, 65, 0))), HasSubstr("signal 65 out of 0..64"));
  EXPECT_THAT(errorOf(decodeReattached(item(5, 9, 6))), HasSubstr("unknown flags 6"));
  EXPECT_THAT(errorOf(decodeReattached(u32Field(1, 10) + field(2, "short"))),
              HasSubstr("5 bytes, expected 20"));
}

// Session keeping (kFeatureKeepSessions): the live executions a dead supervisor left, the notes
// that describe them, and the messages that take them over.
TEST(ProtocolCodec, LiveExecutionsNotesAndResumeRoundTrip) {
  Reattached m;
  m.last_request_id = 9;
  m.features = kFeatureKeepSessions;
  m.live = {{3, 17, true, false, R"({"kind":"context"})", 4096, 0},
            {9, 18, false, true, "", 12, 1 << 20}};
  auto [h, p] = encodeFrame(1, m);
  auto d = decodeReattached(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->features, kFeatureKeepSessions);
  ASSERT_EQ(d->live.size(), 2u);
  EXPECT_EQ(d->live[0].request_id, 3u);
  EXPECT_EQ(d->live[0].pid, 17u);
  EXPECT_TRUE(d->live[0].code_context);
  EXPECT_FALSE(d->live[0].exited);
  EXPECT_EQ(d->live[0].note, R"({"kind":"context"})");
  EXPECT_EQ(d->live[0].held_bytes, 4096u);
  EXPECT_TRUE(d->live[1].exited);
  EXPECT_EQ(d->live[1].dropped_bytes, 1u << 20);

  // An agent built before session keeping: no features, no live list.
  Reattached old;
  old.last_request_id = 2;
  auto [oh, op] = encodeFrame(1, old);
  auto od = decodeReattached(op);
  ASSERT_TRUE(od);
  EXPECT_EQ(od->features, 0u);
  EXPECT_TRUE(od->live.empty());

  // A hostile agent cannot name ids the old supervisor never used, or send oversized notes.
  Reattached bad = m;
  bad.live[0].request_id = 10;
  EXPECT_THAT(errorOf(decodeReattached(encodeFrame(1, bad).second)), HasSubstr("(1..9)"));
  bad = m;
  bad.live[1].note = std::string(kMaxNote + 1, 'n');
  EXPECT_THAT(errorOf(decodeReattached(encodeFrame(1, bad).second)),
              HasSubstr("4097 bytes, at most 4096"));

  auto [rh, rp] = encodeFrame(5, Reattach{.keep_sessions = true});
  auto r = decodeReattach(rp);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->keep_sessions);
  ASSERT_TRUE(decodeReattach(""));  // an old supervisor's Reattach
  EXPECT_FALSE(decodeReattach("")->keep_sessions);

  auto [nh, np] = encodeFrame(3, Note{"ctx"});
  EXPECT_EQ(nh.type, MsgType::kNote);
  EXPECT_STREQ(msgTypeName(nh.type), "Note");
  ASSERT_TRUE(decodeNote(np));
  EXPECT_EQ(decodeNote(np)->note, "ctx");
  EXPECT_THAT(errorOf(decodeNote(encodeFrame(3, Note{std::string(kMaxNote + 1, 'x')}).second)),
              HasSubstr("at most 4096"));
  auto [sh, sp] = encodeFrame(4, Resume{});
  EXPECT_EQ(sh.type, MsgType::kResume);
  EXPECT_STREQ(msgTypeName(sh.type), "Resume");
  EXPECT_TRUE(sp.empty());

  Stdin in;
  in.data = "code";
  in.note = "run r2";
  auto di = decodeStdin(encodeFrame(4, in).second);
  ASSERT_TRUE(di);
  EXPECT_EQ(di->note, "run r2");
  EXPECT_FALSE(decodeStdin(encodeFrame(4, Stdin{"x", false, std::nullopt}).second)->note);
  EXPECT_THAT(errorOf(decodeStdin(
                  encodeFrame(4, Stdin{"x", false, std::string(kMaxNote + 1, 'n')}).second)),
              HasSubstr("at most 4096"));

  Exec e;
  e.argv = {"/bin/true"};
  e.note = R"({"kind":"command"})";
  auto de = decodeExec(encodeFrame(2, e).second);
  ASSERT_TRUE(de);
  EXPECT_EQ(de->note, e.note);
  Hello hello;
  hello.agent_pid = 1;
  hello.features = kAgentFeatures;
  auto dh = decodeHello(encodeFrame(0, hello).second);
  ASSERT_TRUE(dh);
  EXPECT_EQ(dh->features, kAgentFeatures);
}

TEST(ProtocolCodec, UnknownTagsAreSkipped) {
  auto d = decodeSignal(field(99, "future field") + u32Field(1, 9) + field(1000, ""));
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->signo, 9);
}

TEST(ProtocolCodec, MsgTypeNames) {
  EXPECT_STREQ(msgTypeName(MsgType::kHello), "Hello");
  EXPECT_STREQ(msgTypeName(MsgType::kFileData), "FileData");
  EXPECT_STREQ(msgTypeName(MsgType::kOk), "Ok");
  EXPECT_STREQ(msgTypeName(MsgType::kStarted), "Started");
  EXPECT_STREQ(msgTypeName(MsgType::kFileList), "FileList");
  EXPECT_STREQ(msgTypeName(MsgType::kFileStat), "FileStat");
  EXPECT_STREQ(msgTypeName(MsgType::kFileEntries), "FileEntries");
  EXPECT_STREQ(msgTypeName(MsgType::kFileMkdir), "FileMkdir");
  EXPECT_STREQ(msgTypeName(MsgType::kFileRemove), "FileRemove");
  EXPECT_STREQ(msgTypeName(MsgType::kFileRename), "FileRename");
  EXPECT_STREQ(msgTypeName(static_cast<MsgType>(77)), "unknown");
}

// ---- header ----

TEST(ProtocolHeader, Rejections) {
  EXPECT_EQ(errorOf(decodeHeader("short")), "frame header: 5 bytes, need 12");
  EXPECT_EQ(errorOf(decodeHeader(header(0, 0, 1))), "frame header: unknown message type 0");
  EXPECT_EQ(errorOf(decodeHeader(header(0, 29, 1))), "frame header: unknown message type 29");
  for (uint16_t t = 1; t <= 28; ++t) EXPECT_TRUE(decodeHeader(header(0, t, 1))) << t;
  EXPECT_EQ(errorOf(decodeHeader(header(kMaxPayload + 1, 6, 1))),
            "frame header: Output payload of 1048577 bytes exceeds the 1048576-byte limit");
  auto ok = decodeHeader(header(kMaxPayload, 6, 0xdeadbeef, 0x8001));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->flags, 0x8001);
  EXPECT_EQ(ok->request_id, 0xdeadbeefu);
}

// ---- field-level failures ----

TEST(ProtocolValidation, PayloadStructure) {
  EXPECT_EQ(errorOf(decodeSignal(u32Field(1, 9) + std::string("\x01\x00\x02", 3))),
            "Signal: truncated field header at offset 10 (3 bytes left, need 6)");
  std::string lying = u32Field(1, 9);
  lying[2] = 5;  // claims 5 bytes, 4 present
  EXPECT_EQ(errorOf(decodeSignal(lying)),
            "Signal: field tag 1 at offset 0 claims 5 bytes but only 4 remain");
  EXPECT_EQ(errorOf(decodeSignal(u32Field(1, 9) + u32Field(1, 9))),
            "Signal: field 'signo' (tag 1): appears more than once");
  EXPECT_THAT(errorOf(decodeStdin(std::string(kMaxPayload + 1, '\0'))),
              HasSubstr("Stdin: payload of 1048577 bytes exceeds the 1048576-byte limit"));
}

TEST(ProtocolValidation, Hello) {
  EXPECT_EQ(errorOf(decodeHello(u32Field(3, 1))),
            "Hello: field 'protocol_version' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeHello(u32Field(1, 1))),
            "Hello: field 'agent_pid' (tag 3): missing (required)");
  EXPECT_EQ(errorOf(decodeHello(u32Field(1, 1) + field(3, "abc"))),
            "Hello: field 'agent_pid' (tag 3): 3 bytes, expected 4");
  EXPECT_EQ(errorOf(decodeHello(u32Field(1, 1) + u32Field(3, 1) + field(2, std::string("a\0", 2)))),
            "Hello: field 'agent_version' (tag 2): contains a NUL byte");
}

std::string configureBase() { return u32Field(1, 1000) + u32Field(2, 1000); }

std::string rlimitItem(uint32_t res, uint64_t soft, uint64_t hard) {
  std::string v;
  testing::putLe(v, res, 4);
  testing::putLe(v, soft, 8);
  testing::putLe(v, hard, 8);
  return field(5, v);
}

TEST(ProtocolValidation, Configure) {
  EXPECT_EQ(errorOf(decodeConfigure(u32Field(2, 1))),
            "Configure: field 'uid' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeConfigure(u32Field(1, 1))),
            "Configure: field 'gid' (tag 2): missing (required)");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + u32Field(3, 1))),
            "Configure: field 'keep_caps' (tag 3): 4 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(4, std::string(12, 'x')))),
            "Configure: field 'seccomp_bpf' (tag 4): 12 bytes, not a multiple of the 8-byte "
            "sock_filter size");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(4, std::string(4097 * 8, 'x')))),
            "Configure: field 'seccomp_bpf' (tag 4): 32776 bytes, at most 32768");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(5, "short"))),
            "Configure: field 'rlimit' (tag 5): item 0: 5 bytes, expected 20");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + rlimitItem(7, 1, 2) + rlimitItem(16, 1, 1))),
            "Configure: field 'rlimit' (tag 5): item 1: unknown resource 16");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + rlimitItem(7, 3, 2))),
            "Configure: field 'rlimit' (tag 5): item 0: soft limit 3 above hard limit 2");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(6, "/tmp") + field(6, "home"))),
            "Configure: field 'writable_path' (tag 6): item 1: 'home' is not an absolute path");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(6, std::string("/a\0b", 4)))),
            "Configure: field 'writable_path' (tag 6): item 0 contains a NUL byte");
  std::string many = configureBase();
  for (size_t i = 0; i <= kMaxListItems; ++i) many += field(6, "/");
  EXPECT_EQ(errorOf(decodeConfigure(many)),
            "Configure: field 'writable_path' (tag 6): more than 4096 items");
  std::string many_rl = configureBase();
  for (size_t i = 0; i <= kMaxListItems; ++i) many_rl += rlimitItem(1, 1, 1);
  EXPECT_EQ(errorOf(decodeConfigure(many_rl)),
            "Configure: field 'rlimit' (tag 5): more than 4096 items");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(7, "\x02"))),
            "Configure: field 'landlock' (tag 7): boolean value 2, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeConfigure(configureBase() + field(7, std::string("\x01\x00", 2)))),
            "Configure: field 'landlock' (tag 7): 2 bytes, expected 1");
}

TEST(ProtocolValidation, Exec) {
  EXPECT_EQ(errorOf(decodeExec("")), "Exec: field 'argv' (tag 1): 0 items, need at least 1");
  EXPECT_EQ(errorOf(decodeExec(field(1, "python3"))),
            "Exec: field 'argv' (tag 1): argv[0] 'python3' is not an absolute path");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/sh") + field(1, std::string("-c\0", 3)))),
            "Exec: field 'argv' (tag 1): item 1 contains a NUL byte");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/" + std::string(5000, 'a')))),
            "Exec: field 'argv' (tag 1): argv[0] path of 5001 bytes, at most 4095");
  std::string many;
  for (size_t i = 0; i <= kMaxListItems; ++i) many += field(1, "/x");
  EXPECT_EQ(errorOf(decodeExec(many)), "Exec: field 'argv' (tag 1): more than 4096 items");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(2, "A=1") + field(2, "NOEQUALS"))),
            "Exec: field 'env' (tag 2): item 1 is not of the form K=V");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(2, "=v"))),
            "Exec: field 'env' (tag 2): item 0 is not of the form K=V");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(3, "work"))),
            "Exec: field 'cwd' (tag 3): 'work' is not an absolute path");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(3, "/a") + field(3, "/b"))),
            "Exec: field 'cwd' (tag 3): appears more than once");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + u32Field(4, 5))),
            "Exec: field 'timeout_ms' (tag 4): 4 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + u64Field(5, 1) + field(6, ""))),
            "Exec: field 'stderr_cap' (tag 6): 0 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + u32Field(7, 1))),
            "Exec: field 'stdin_pipe' (tag 7): 4 bytes, expected 1");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(8, "\x02"))),
            "Exec: field 'control_pipe' (tag 8): boolean value 2, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + field(9, "\x02"))),
            "Exec: field 'kill_scope' (tag 9): scope 2, expected 0 (all) or 1 (session)");
  EXPECT_EQ(errorOf(decodeExec(field(1, "/bin/true") + u32Field(9, 1))),
            "Exec: field 'kill_scope' (tag 9): 4 bytes, expected 1");
}

TEST(ProtocolValidation, StdinSignalOutput) {
  EXPECT_EQ(errorOf(decodeStdin(field(1, std::string(kMaxChunk + 1, 'x')))),
            "Stdin: field 'data' (tag 1): 262145 bytes, at most 262144");
  EXPECT_EQ(errorOf(decodeStdin(field(2, "\x05"))),
            "Stdin: field 'eof' (tag 2): boolean value 5, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeSignal("")), "Signal: field 'signo' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeSignal(u32Field(1, 0))),
            "Signal: field 'signo' (tag 1): signal 0 outside 1..64");
  EXPECT_EQ(errorOf(decodeSignal(u32Field(1, 65))),
            "Signal: field 'signo' (tag 1): signal 65 outside 1..64");
  EXPECT_EQ(errorOf(decodeSignal(u32Field(1, static_cast<uint32_t>(-9)))),
            "Signal: field 'signo' (tag 1): signal -9 outside 1..64");
  EXPECT_EQ(errorOf(decodeSignal(u64Field(1, 9))),
            "Signal: field 'signo' (tag 1): 8 bytes, expected 4");
  EXPECT_TRUE(decodeSignal(u32Field(1, 64)));
  EXPECT_EQ(errorOf(decodeOutput(field(2, "x"))),
            "Output: field 'stream' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeOutput(field(1, "\x04"))),
            "Output: field 'stream' (tag 1): stream 4, expected 1, 2 or 3");
  EXPECT_EQ(errorOf(decodeOutput(field(1, std::string("\0", 1)))),
            "Output: field 'stream' (tag 1): stream 0, expected 1, 2 or 3");
  EXPECT_EQ(errorOf(decodeOutput(field(1, "\x01") + field(2, std::string(kMaxChunk + 1, 'x')))),
            "Output: field 'data' (tag 2): 262145 bytes, at most 262144");
}

TEST(ProtocolValidation, ExitedAndError) {
  EXPECT_EQ(errorOf(decodeExited(u32Field(2, 9))),
            "Exited: field 'exit_code' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeExited(u32Field(1, 0) + u32Field(2, 65))),
            "Exited: field 'signal' (tag 2): signal 65 outside 0..64");
  EXPECT_EQ(errorOf(decodeExited(u32Field(1, 0) + u32Field(11, 65))),
            "Exited: field 'max_rss_kb' (tag 11): 4 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeExited(u32Field(1, 0) + field(13, "\x03"))),
            "Exited: field 'control_truncated' (tag 13): boolean value 3, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeError(u32Field(1, 2))),
            "Error: field 'stage' (tag 2): missing (required)");
  EXPECT_EQ(errorOf(decodeError(field(2, std::string("ex\0ec", 5)))),
            "Error: field 'stage' (tag 2): contains a NUL byte");
  EXPECT_EQ(errorOf(decodeError(field(2, "exec") + field(1, "\x02"))),
            "Error: field 'errnum' (tag 1): 1 bytes, expected 4");
}

TEST(ProtocolValidation, FileMessages) {
  EXPECT_EQ(errorOf(decodeFileWrite(field(3, "data"))),
            "FileWrite: field 'path' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileWrite(field(1, "rel/a"))),
            "FileWrite: field 'path' (tag 1): 'rel/a' is not an absolute path");
  EXPECT_EQ(errorOf(decodeFileWrite(field(1, std::string("/a\0b", 4)))),
            "FileWrite: field 'path' (tag 1): contains a NUL byte");
  EXPECT_EQ(errorOf(decodeFileWrite(field(1, "/a") + u32Field(2, 010000))),
            "FileWrite: field 'mode' (tag 2): mode 4096 has bits outside 07777");
  EXPECT_EQ(errorOf(decodeFileWrite(field(1, "/a") + field(3, std::string(kMaxChunk + 1, 'x')))),
            "FileWrite: field 'data' (tag 3): 262145 bytes, at most 262144");
  EXPECT_EQ(errorOf(decodeFileWrite(field(1, "/a") + field(5, "\x02"))),
            "FileWrite: field 'last' (tag 5): boolean value 2, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeFileRead(u64Field(2, 1))),
            "FileRead: field 'path' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileRead(field(1, ""))),
            "FileRead: field 'path' (tag 1): '' is not an absolute path");
  EXPECT_EQ(errorOf(decodeFileRead(field(1, "/a") + u32Field(2, 1))),
            "FileRead: field 'max_bytes' (tag 2): 4 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeFileData(field(1, std::string(kMaxChunk + 1, 'x')))),
            "FileData: field 'data' (tag 1): 262145 bytes, at most 262144");
  EXPECT_EQ(errorOf(decodeFileData(field(2, "\x07"))),
            "FileData: field 'last' (tag 2): boolean value 7, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeFileData(field(3, "\x07"))),
            "FileData: field 'size' (tag 3): 1 bytes, expected 8");
}

TEST(ProtocolValidation, Started) {
  EXPECT_EQ(errorOf(decodeStarted("")), "Started: field 'pid' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeStarted(u32Field(1, 0))),
            "Started: field 'pid' (tag 1): pid 0, expected a process id");
  EXPECT_EQ(errorOf(decodeStarted(u64Field(1, 7))),
            "Started: field 'pid' (tag 1): 8 bytes, expected 4");
}

TEST(ProtocolValidation, FileRequests) {
  EXPECT_EQ(errorOf(decodeFileList("")), "FileList: field 'path' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileList(field(1, "home"))),
            "FileList: field 'path' (tag 1): 'home' is not an absolute path");
  EXPECT_EQ(errorOf(decodeFileStat(field(1, std::string("/a\0", 3)))),
            "FileStat: field 'path' (tag 1): contains a NUL byte");
  EXPECT_EQ(errorOf(decodeFileStat(field(1, "/" + std::string(PATH_MAX, 'a')))),
            "FileStat: field 'path' (tag 1): path of 4097 bytes, at most 4095");
  EXPECT_EQ(errorOf(decodeFileMkdir(field(2, "\x01"))),
            "FileMkdir: field 'path' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileMkdir(field(1, "/d") + u32Field(3, 010000))),
            "FileMkdir: field 'mode' (tag 3): mode 4096 has bits outside 07777");
  EXPECT_EQ(errorOf(decodeFileMkdir(field(1, "/d") + field(2, "\x09"))),
            "FileMkdir: field 'parents' (tag 2): boolean value 9, expected 0 or 1");
  EXPECT_EQ(errorOf(decodeFileRemove(field(1, "/a") + field(1, "/b"))),
            "FileRemove: field 'path' (tag 1): appears more than once");
  EXPECT_EQ(errorOf(decodeFileRemove(field(1, "/a") + u32Field(2, 1))),
            "FileRemove: field 'recursive' (tag 2): 4 bytes, expected 1");
  EXPECT_EQ(errorOf(decodeFileRename(field(1, "/a"))),
            "FileRename: field 'to' (tag 2): missing (required)");
  EXPECT_EQ(errorOf(decodeFileRename(field(2, "/a"))),
            "FileRename: field 'from' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileRename(field(1, "/a") + field(2, "b"))),
            "FileRename: field 'to' (tag 2): 'b' is not an absolute path");
}

std::string entry(std::string_view name, uint8_t type) {
  return field(1, field(1, name) + field(2, std::string(1, static_cast<char>(type))));
}

TEST(ProtocolValidation, FileEntries) {
  EXPECT_EQ(errorOf(decodeFileEntries(entry("a", 1) + field(1, field(2, "\x01")))),
            "FileEntries: field 'entry' (tag 1): item 1: field 'name' (tag 1): missing (required)");
  EXPECT_EQ(errorOf(decodeFileEntries(entry("", 1))),
            "FileEntries: field 'entry' (tag 1): item 0: field 'name' (tag 1): empty");
  EXPECT_EQ(
      errorOf(decodeFileEntries(entry(std::string("a\0b", 3), 1))),
      "FileEntries: field 'entry' (tag 1): item 0: field 'name' (tag 1): contains a NUL byte");
  EXPECT_EQ(errorOf(decodeFileEntries(entry(std::string(PATH_MAX, 'a'), 1))),
            "FileEntries: field 'entry' (tag 1): item 0: field 'name' (tag 1): 4096 bytes, at "
            "most 4095");
  EXPECT_EQ(
      errorOf(decodeFileEntries(entry("a", 0))),
      "FileEntries: field 'entry' (tag 1): item 0: field 'type' (tag 2): type 0 outside 1..4");
  EXPECT_EQ(
      errorOf(decodeFileEntries(entry("a", 5))),
      "FileEntries: field 'entry' (tag 1): item 0: field 'type' (tag 2): type 5 outside 1..4");
  EXPECT_EQ(errorOf(decodeFileEntries(field(1, field(1, "a")))),
            "FileEntries: field 'entry' (tag 1): item 0: field 'type' (tag 2): missing (required)");
  EXPECT_EQ(
      errorOf(decodeFileEntries(field(1, field(1, "a") + field(2, "\x01") + u32Field(4, 070000)))),
      "FileEntries: field 'entry' (tag 1): item 0: field 'mode' (tag 4): mode 28672 has bits "
      "outside 07777");
  EXPECT_EQ(
      errorOf(decodeFileEntries(field(1, field(1, "a") + field(2, "\x01") + u32Field(3, 1)))),
      "FileEntries: field 'entry' (tag 1): item 0: field 'size' (tag 3): 4 bytes, expected 8");
  EXPECT_EQ(errorOf(decodeFileEntries(field(1, "abc"))),
            "FileEntries: field 'entry' (tag 1): item 0: truncated field header at offset 0 (3 "
            "bytes left, need 6)");
  EXPECT_EQ(errorOf(decodeFileEntries(field(2, "\x02"))),
            "FileEntries: field 'last' (tag 2): boolean value 2, expected 0 or 1");
  std::string many;
  for (size_t i = 0; i <= kMaxListItems; ++i) many += entry("a", 1);
  EXPECT_EQ(errorOf(decodeFileEntries(many)),
            "FileEntries: field 'entry' (tag 1): more than 4096 items");
}

}  // namespace
}  // namespace airlock::protocol
