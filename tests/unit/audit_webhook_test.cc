// The lifecycle webhooks (supervisor/audit/webhook_sink.h): the signature, the retry schedule,
// Retry-After, the bounded queue, and one delivery retried after a 503, against a loopback
// receiver.
#include "supervisor/audit/webhook_sink.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_support.h"
#include "webhook_receiver.h"

namespace airlock::audit {
namespace {

using std::chrono::milliseconds;
using testing::WebhookReceiver;

TEST(WebhookSignature, IsTheHmacSha256OfTheBodyInHex) {
  // RFC 4231, test case 2.
  EXPECT_EQ(webhookSignature("Jefe", "what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_NE(webhookSignature("Jefe", "what do ya want for nothing!"),
            webhookSignature("Jefe", "what do ya want for nothing?"));
}

TEST(WebhookBackoff, DoublesFromTheBaseUpToTheCapWithJitterInTheUpperHalf) {
  const milliseconds base(500), cap(30000);
  EXPECT_EQ(webhookBackoff(1, base, cap, 1.0), milliseconds(500));
  EXPECT_EQ(webhookBackoff(1, base, cap, 0.0), milliseconds(250));
  EXPECT_EQ(webhookBackoff(2, base, cap, 1.0), milliseconds(1000));
  EXPECT_EQ(webhookBackoff(3, base, cap, 1.0), milliseconds(2000));
  EXPECT_EQ(webhookBackoff(3, base, cap, 0.5), milliseconds(1500));
  EXPECT_EQ(webhookBackoff(7, base, cap, 1.0), milliseconds(30000));   // 32 s, capped
  EXPECT_EQ(webhookBackoff(60, base, cap, 1.0), milliseconds(30000));  // no overflow
  EXPECT_EQ(webhookBackoff(60, base, cap, 0.0), milliseconds(15000));
}

TEST(WebhookBackoff, ARetryAfterReplacesTheScheduleUpToFiveMinutes) {
  EXPECT_EQ(webhookBackoff(1, milliseconds(500), milliseconds(30000), 1.0, milliseconds(7000)),
            milliseconds(7000));
  EXPECT_EQ(webhookBackoff(1, milliseconds(500), milliseconds(30000), 1.0, milliseconds(0)),
            milliseconds(0));
  EXPECT_EQ(webhookBackoff(1, milliseconds(500), milliseconds(30000), 1.0, milliseconds(86400000)),
            kMaxRetryAfter);
}

TEST(WebhookRetryAfter, TakesDeltaSecondsOnly) {
  EXPECT_EQ(parseRetryAfter("120"), milliseconds(120000));
  EXPECT_EQ(parseRetryAfter(" 3 "), milliseconds(3000));
  EXPECT_EQ(parseRetryAfter("0"), milliseconds(0));
  EXPECT_EQ(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_EQ(parseRetryAfter("-1"), std::nullopt);
  EXPECT_EQ(parseRetryAfter("1.5"), std::nullopt);
  EXPECT_EQ(parseRetryAfter(""), std::nullopt);
  EXPECT_EQ(parseRetryAfter("99999999999"), std::nullopt);
}

WebhookOptions optionsFor(const std::string& url) {
  WebhookOptions o;
  o.url = *policy::parseWebhookUrl(url);
  o.url_text = url;
  o.events = {"sandbox"};
  return o;
}

TEST(WebhookSink, RetriesA503AndSignsEveryAttemptWithTheSameDeliveryId) {
  WebhookReceiver receiver(/*fail_first=*/1);
  auto options = optionsFor(receiver.url("/airlock/events"));
  options.secret = "s3cret";
  auto sink = WebhookSink::start(options);
  const nlohmann::json record = {{"type", "sandbox"}, {"event", "create"}, {"tenant", "acme"}};
  EXPECT_TRUE(sink->offer("sandbox", record));
  EXPECT_FALSE(sink->offer("execution", record)) << "not one of the events";
  ASSERT_TRUE(receiver.waitFor([](const auto& r) { return r.size() >= 2; }, milliseconds(10000)));
  sink->shutdown(milliseconds(1000));
  auto got = receiver.requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].answered, 503);
  EXPECT_EQ(got[1].answered, 200);
  for (const auto& r : got) {
    EXPECT_EQ(r.target, "/airlock/events");
    EXPECT_EQ(r.event, "sandbox");
    EXPECT_EQ(nlohmann::json::parse(r.body), record);
    EXPECT_EQ(r.signature, webhookSignature("s3cret", r.body));
    EXPECT_EQ(r.delivery.size(), 16u);
  }
  EXPECT_EQ(got[0].delivery, got[1].delivery);
  auto st = sink->stats();
  EXPECT_EQ(st.delivered, 1u);
  EXPECT_EQ(st.retries, 1u);
  EXPECT_EQ(st.dropped, 0u);
}

TEST(WebhookSink, GivesUpAfterMaxRetries) {
  WebhookReceiver receiver(/*fail_first=*/100);
  auto options = optionsFor(receiver.url());
  options.max_retries = 2;
  options.backoff_base = milliseconds(10);  // the schedule itself is checked above
  auto sink = WebhookSink::start(options);
  sink->offer("sandbox", {{"n", 1}});
  ASSERT_TRUE(receiver.waitFor([](const auto& r) { return r.size() >= 3; }, milliseconds(10000)));
  sink->shutdown(milliseconds(1000));
  EXPECT_EQ(receiver.requests().size(), 3u) << "one attempt and two retries";
  EXPECT_EQ(sink->stats().failed, 1u);
  EXPECT_EQ(sink->stats().delivered, 0u);
}

TEST(WebhookSink, DropsAndCountsWhatTheFullQueueCannotHoldWithoutBlocking) {
  // A receiver that never answers: the kernel accepts connections into the backlog and the
  // sink's one attempt waits for its timeout, while offers keep coming.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto options = optionsFor("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/");
  options.queue_limit = 4;
  options.timeout = milliseconds(300);
  options.max_retries = 0;
  auto sink = WebhookSink::start(options);
  const auto t0 = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 20; ++i) accepted += sink->offer("sandbox", {{"n", i}}) ? 1 : 0;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(100)) << "offer must not block";
  // The queue's 4, plus the one the thread may already have taken out of it.
  EXPECT_GE(accepted, 4);
  EXPECT_LE(accepted, 5);
  EXPECT_EQ(sink->stats().dropped, static_cast<uint64_t>(20 - accepted));
  // Shutdown with no time left: what still waits is dropped, counted, and the thread ends.
  sink->shutdown(milliseconds(0));
  auto st = sink->stats();
  EXPECT_EQ(st.delivered, 0u);
  EXPECT_EQ(st.dropped + st.failed, 20u);
  ::close(fd);
}

TEST(WebhookOptionsFrom, ReadsTheSecretFileWithoutItsNewline) {
  airlock::testing::TempDir dir;
  dir.write("secret", "k3y\n");
  policy::AuditSettings s;
  s.webhook_url = "http://127.0.0.1:9/hook";
  s.webhook_secret_file = dir.file("secret");
  s.webhook_events = {"sandbox", "execution"};
  auto o = webhookOptionsFrom(s);
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_EQ(o->secret, "k3y");
  EXPECT_EQ(o->url.port, 9);
  EXPECT_EQ(o->url.target, "/hook");
  EXPECT_EQ(o->events, (std::set<std::string>{"sandbox", "execution"}));

  s.webhook_secret_file = dir.file("missing");
  auto missing = webhookOptionsFrom(s);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("webhook_secret_file"), std::string::npos);
  EXPECT_NE(missing.error().message().find(dir.file("missing")), std::string::npos);
}

}  // namespace
}  // namespace airlock::audit
