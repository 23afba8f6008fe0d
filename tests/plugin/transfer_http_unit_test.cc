// airlock.transfer.http's rules without a network: URL parsing and normalization, the redacted
// display, redirect resolution, transfer.http.allow patterns, the protected address ranges and
// the rules' JSON. The plugin against a real server is transfer_http_test.cc (root).
#include <gtest/gtest.h>

#include <airlock/plugin.hpp>
#include <stdexcept>

#include "address_check.h"
#include "http_client.h"
#include "rules.h"
#include "url.h"

namespace airlock::transfer_http {
namespace {

IpAddress ip(const char* s) { return boost::asio::ip::make_address(s); }

TEST(TransferHttpUrl, ParsesTheParts) {
  Url u = parseUrl("HTTPS://User:p%40ss@Files.Example.COM:8443/a/b.tar.gz?X-Sig=abc#frag");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_TRUE(u.has_userinfo);
  EXPECT_EQ(u.user, "User");
  EXPECT_EQ(u.password, "p@ss");
  EXPECT_EQ(u.host, "files.example.com");
  EXPECT_EQ(u.port, 8443);
  EXPECT_EQ(u.path, "/a/b.tar.gz");
  EXPECT_TRUE(u.has_query);
  EXPECT_EQ(u.query, "X-Sig=abc");
  EXPECT_EQ(u.target(), "/a/b.tar.gz?X-Sig=abc");
  EXPECT_EQ(u.authority(), "files.example.com:8443");
}

TEST(TransferHttpUrl, DefaultsPortAndPath) {
  Url u = parseUrl("http://example.com");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.path, "/");
  EXPECT_EQ(u.authority(), "example.com");
  EXPECT_EQ(parseUrl("https://example.com:/x").port, 443);
  EXPECT_EQ(parseUrl("https://example.com./x").host, "example.com");
}

TEST(TransferHttpUrl, Ipv6LiteralsAreCanonical) {
  Url u = parseUrl("http://[2001:DB8:0:0::1]:8080/x");
  EXPECT_TRUE(u.ipv6_literal);
  EXPECT_EQ(u.host, "2001:db8::1");
  EXPECT_EQ(u.authority(), "[2001:db8::1]:8080");
  EXPECT_THROW(parseUrl("http://[fe80::1%25eth0]/"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://[::1/"), std::invalid_argument);
}

TEST(TransferHttpUrl, RefusesWhatCannotBeSentSafely) {
  EXPECT_THROW(parseUrl("ftp://example.com/x"), std::invalid_argument);
  EXPECT_THROW(parseUrl("example.com/x"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http:///x"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://exa mple.com/"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://example.com:99999/"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://example.com:8a/"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://a..b/"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://ex%41mple.com/"), std::invalid_argument);
  // A CR or LF would split the request line: header injection.
  EXPECT_THROW(parseUrl("http://example.com/a\r\nX-Evil: 1"), std::invalid_argument);
  EXPECT_THROW(parseUrl("http://example.com/a?b=\n"), std::invalid_argument);
}

TEST(TransferHttpUrl, EncodesWhatUrisDoNotAllow) {
  Url u = parseUrl("http://example.com/a b/\xC3\xA9\\x?q=a b");
  EXPECT_EQ(u.path, "/a%20b/%C3%A9%5Cx");
  EXPECT_EQ(u.query, "q=a%20b");
}

TEST(TransferHttpUrl, NormalizesDotSegmentsAndUnreservedEscapes) {
  EXPECT_EQ(parseUrl("http://h/data/../secret").path, "/secret");
  EXPECT_EQ(parseUrl("http://h/data/%2e%2E/secret").path, "/secret");
  EXPECT_EQ(parseUrl("http://h/a/./b/../../c/").path, "/c/");
  EXPECT_EQ(parseUrl("http://h/../../x").path, "/x");
  EXPECT_EQ(parseUrl("http://h/%7Euser/%41").path, "/~user/A");
  EXPECT_EQ(parseUrl("http://h/a%2fb").path, "/a%2Fb");
  // The query is signed as it is: left alone.
  EXPECT_EQ(parseUrl("http://h/x?a=%7e&b=%2f").query, "a=%7e&b=%2f");
}

TEST(TransferHttpUrl, DisplayHidesCredentialsAndQuery) {
  const std::string location =
      "https://AKIA:secret@bucket.s3.example.com/k/a.tar?X-Amz-Signature=deadbeef#x";
  EXPECT_EQ(redact(location), "https://bucket.s3.example.com/k/a.tar?\xE2\x80\xA6");
  EXPECT_EQ(parseUrl(location).display(), "https://bucket.s3.example.com/k/a.tar?\xE2\x80\xA6");
  EXPECT_EQ(redact("http://u@h:81/p"), "http://h:81/p");
  EXPECT_EQ(parseUrl("http://u:p@h:81/p").display(), "http://h:81/p");
  EXPECT_EQ(parseUrl("http://h:80/p").display(), "http://h/p");
  // Unparseable locations are redacted all the same.
  EXPECT_EQ(redact("https://user:pw@bad host/x?token=1"), "https://bad host/x?\xE2\x80\xA6");
  EXPECT_EQ(redact("https://a\nb/"), "https://a?b/");
  const std::string long_path = "http://h/" + std::string(1000, 'a');
  EXPECT_LT(redact(long_path).size(), 320u);
  EXPECT_LT(parseUrl(long_path + "?s=1").display().size(), 320u);
}

TEST(TransferHttpUrl, ResolvesRedirects) {
  const Url base = parseUrl("https://user:pw@h.example:8443/a/b/c.tar?q=1");
  EXPECT_EQ(resolveReference(base, "/x.tar").withoutUserinfo(), "https://h.example:8443/x.tar");
  EXPECT_EQ(resolveReference(base, "d.tar").withoutUserinfo(), "https://h.example:8443/a/b/d.tar");
  EXPECT_EQ(resolveReference(base, "../d.tar").withoutUserinfo(), "https://h.example:8443/a/d.tar");
  EXPECT_EQ(resolveReference(base, "?r=2").withoutUserinfo(),
            "https://h.example:8443/a/b/c.tar?r=2");
  EXPECT_EQ(resolveReference(base, "//other.example/y").withoutUserinfo(),
            "https://other.example/y");
  EXPECT_EQ(resolveReference(base, "http://169.254.169.254/latest").withoutUserinfo(),
            "http://169.254.169.254/latest");
  EXPECT_EQ(resolveReference(base, "  /spaced ").path, "/spaced");
  EXPECT_FALSE(resolveReference(base, "/x").has_userinfo);  // never carried to another URL
  EXPECT_THROW(resolveReference(base, "file:///etc/passwd"), std::invalid_argument);
  EXPECT_THROW(resolveReference(base, "gopher://h/"), std::invalid_argument);
}

TEST(TransferHttpPattern, HostsAndWildcards) {
  const Pattern exact = parsePattern("https://Files.Example.com");
  EXPECT_TRUE(exact.matches(parseUrl("https://files.example.com/any/thing")));
  EXPECT_TRUE(exact.matches(parseUrl("https://FILES.example.com:443/")));
  EXPECT_FALSE(exact.matches(parseUrl("https://a.files.example.com/")));
  EXPECT_FALSE(exact.matches(parseUrl("http://files.example.com/")));        // scheme
  EXPECT_FALSE(exact.matches(parseUrl("https://files.example.com:8443/")));  // port
  EXPECT_FALSE(exact.matches(parseUrl("https://files.example.com.evil.net/")));

  const Pattern wild = parsePattern("https://*.example.com");
  EXPECT_TRUE(wild.matches(parseUrl("https://a.example.com/")));
  EXPECT_TRUE(wild.matches(parseUrl("https://a.b.example.com/")));
  EXPECT_FALSE(wild.matches(parseUrl("https://example.com/")));  // subdomains only
  EXPECT_FALSE(wild.matches(parseUrl("https://badexample.com/")));
  EXPECT_FALSE(wild.matches(parseUrl("https://example.com.evil.net/")));

  EXPECT_TRUE(parsePattern("http://10.1.2.3:8080").matches(parseUrl("http://10.1.2.3:8080/x")));
  EXPECT_FALSE(parsePattern("http://10.1.2.3:8080").matches(parseUrl("http://10.1.2.3/x")));
  EXPECT_TRUE(parsePattern("http://[2001:db8::0:1]").matches(parseUrl("http://[2001:DB8::1]/")));
}

TEST(TransferHttpPattern, PathPrefixes) {
  const Pattern data = parsePattern("https://h.example/data");
  EXPECT_TRUE(data.matches(parseUrl("https://h.example/data")));
  EXPECT_TRUE(data.matches(parseUrl("https://h.example/data/")));
  EXPECT_TRUE(data.matches(parseUrl("https://h.example/data/x/y.tar?sig=1")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/database")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/dat")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/")));
  // Dot segments and encoded separators cannot climb out of the prefix.
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/data/../secret")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/data/%2e%2e/secret")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/data/..%2fsecret")));
  EXPECT_FALSE(data.matches(parseUrl("https://h.example/data/..%5Csecret")));

  const Pattern slash = parsePattern("https://h.example/pub/");
  EXPECT_TRUE(slash.matches(parseUrl("https://h.example/pub/a")));
  EXPECT_FALSE(slash.matches(parseUrl("https://h.example/pub")));
  EXPECT_FALSE(slash.matches(parseUrl("https://h.example/public")));

  EXPECT_TRUE(parsePattern("https://h.example/").matches(parseUrl("https://h.example/a%2Fb")));
}

TEST(TransferHttpPattern, RefusesBadPatterns) {
  for (const char* bad :
       {"files.example.com", "ftp://h", "https://u@h", "https://h/x?y", "https://h/#f",
        "https://a*.example.com", "https://*", "https://*.", "https://h:0", "https://[::1"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parsePattern(bad), std::invalid_argument);
  }
  const std::vector<Pattern> none;
  EXPECT_FALSE(allowed(none, parseUrl("https://h/")));  // the default: nothing
}

TEST(TransferHttpFormat, ComesFromTheExtension) {
  EXPECT_EQ(formatOf("/r/out.tar"), "tar");
  EXPECT_EQ(formatOf("/r/out.TAR.GZ"), "tar.gz");
  EXPECT_EQ(formatOf("/r/out.tgz"), "tar.gz");
  EXPECT_EQ(formatOf("/r/out.tar.zst"), "tar.zst");
  EXPECT_EQ(formatOf("/r/out.tzst"), "tar.zst");
  EXPECT_EQ(formatOf("/r/out.zip"), "zip");
  EXPECT_EQ(formatOf("/r/upload"), "tar.gz");
  EXPECT_EQ(formatOf("/r/out.tar.xz"), "tar.gz");
}

TEST(TransferHttpUrl, BasicAuthorization) {
  EXPECT_EQ(basicAuthorization("Aladdin", "open sesame"), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
  EXPECT_EQ(basicAuthorization("a", ""), "Basic YTo=");
  EXPECT_EQ(basicAuthorization("ab", ""), "Basic YWI6");
}

TEST(TransferHttpAddresses, CidrContains) {
  const Cidr ten = parseCidr("10.0.0.0/8");
  EXPECT_TRUE(ten.contains(ip("10.0.0.1")));
  EXPECT_TRUE(ten.contains(ip("10.255.255.255")));
  EXPECT_FALSE(ten.contains(ip("11.0.0.1")));
  EXPECT_FALSE(ten.contains(ip("::1")));
  EXPECT_TRUE(parseCidr("100.64.0.0/10").contains(ip("100.127.255.255")));
  EXPECT_FALSE(parseCidr("100.64.0.0/10").contains(ip("100.128.0.0")));
  EXPECT_TRUE(parseCidr("fc00::/7").contains(ip("fd12:3456::1")));
  EXPECT_FALSE(parseCidr("fc00::/7").contains(ip("fe00::1")));
  EXPECT_TRUE(parseCidr("fe80::/10").contains(ip("febf::1")));
  EXPECT_TRUE(parseCidr("::/128").contains(ip("::")));
  EXPECT_FALSE(parseCidr("::/128").contains(ip("::1")));
  EXPECT_TRUE(parseCidr("0.0.0.0/0").contains(ip("203.0.113.9")));
  // Host bits are cleared; a bare address is a single host.
  EXPECT_TRUE(parseCidr("10.1.2.3/8").contains(ip("10.9.9.9")));
  EXPECT_TRUE(parseCidr("169.254.169.254").contains(ip("169.254.169.254")));
  EXPECT_FALSE(parseCidr("169.254.169.254").contains(ip("169.254.169.253")));
  for (const char* bad : {"10.0.0.0/33", "::/129", "10.0.0/8", "10.0.0.0/", "10.0.0.0/x", "x"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parseCidr(bad), std::invalid_argument);
  }
}

TEST(TransferHttpAddresses, Ipv4MappedIpv6IsCheckedAsIpv4) {
  EXPECT_TRUE(parseCidr("127.0.0.0/8").contains(ip("::ffff:127.0.0.1")));
  EXPECT_TRUE(parseCidr("169.254.169.254/32").contains(ip("::ffff:a9fe:a9fe")));
  EXPECT_EQ(unmapped(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
  EXPECT_EQ(unmapped(ip("::1")), ip("::1"));
  // A mapped range is the IPv4 range it maps.
  EXPECT_TRUE(parseCidr("::ffff:10.0.0.0/104").contains(ip("10.3.3.3")));
  EXPECT_FALSE(parseCidr("::ffff:10.0.0.0/104").contains(ip("11.3.3.3")));
}

AddressPolicy hostDefaults() {
  AddressPolicy p;
  const std::pair<const char*, const char*> ranges[] = {
      {"0.0.0.0/8", "this network"},
      {"10.0.0.0/8", "private network"},
      {"100.64.0.0/10", "carrier-grade NAT"},
      {"127.0.0.0/8", "loopback"},
      {"169.254.0.0/16", "link-local"},
      {"169.254.169.254/32", "cloud metadata service"},
      {"172.16.0.0/12", "private network"},
      {"192.168.0.0/16", "private network"},
      {"::/128", "unspecified"},
      {"::1/128", "loopback"},
      {"fc00::/7", "unique local"},
      {"fd00:ec2::254/128", "cloud metadata service"},
      {"fe80::/10", "link-local"}};
  for (const auto& [cidr, why] : ranges) p.blocked.push_back({parseCidr(cidr), why});
  return p;
}

TEST(TransferHttpAddresses, BlockedRangesRefuseAndNameTheMostSpecific) {
  const AddressPolicy p = hostDefaults();
  EXPECT_EQ(p.refuses(ip("93.184.216.34")), nullptr);
  EXPECT_EQ(p.refuses(ip("2606:2800:220:1::1")), nullptr);
  ASSERT_NE(p.refuses(ip("127.0.0.1")), nullptr);
  EXPECT_EQ(p.refuses(ip("127.0.0.1"))->why, "loopback");
  ASSERT_NE(p.refuses(ip("169.254.169.254")), nullptr);
  EXPECT_EQ(p.refuses(ip("169.254.169.254"))->cidr.text, "169.254.169.254/32");
  EXPECT_EQ(p.refuses(ip("169.254.1.1"))->cidr.text, "169.254.0.0/16");
  ASSERT_NE(p.refuses(ip("::ffff:127.0.0.1")), nullptr);  // mapped: checked as IPv4
  EXPECT_EQ(p.refuses(ip("::ffff:127.0.0.1"))->why, "loopback");
  ASSERT_NE(p.refuses(ip("::ffff:169.254.169.254")), nullptr);
  EXPECT_EQ(p.refuses(ip("::ffff:169.254.169.254"))->why, "cloud metadata service");
  EXPECT_NE(p.refuses(ip("::1")), nullptr);
  EXPECT_NE(p.refuses(ip("fd00:ec2::254")), nullptr);
  EXPECT_NE(p.refuses(ip("0.0.0.0")), nullptr);
  EXPECT_NE(p.refuses(ip("::")), nullptr);
  EXPECT_EQ(AddressPolicy{}.refuses(ip("127.0.0.1")), nullptr);  // nothing blocked by default
}

TEST(TransferHttpAddresses, AllowPrivateNarrowerThanBlocked) {
  AddressPolicy p = hostDefaults();
  p.allow_private.push_back(parseCidr("10.213.0.0/16"));
  EXPECT_EQ(p.refuses(ip("10.213.4.2")), nullptr);
  EXPECT_EQ(p.refuses(ip("::ffff:10.213.4.2")), nullptr);
  ASSERT_NE(p.refuses(ip("10.1.1.1")), nullptr);  // the rest of 10/8 stays blocked
  EXPECT_EQ(p.refuses(ip("10.1.1.1"))->cidr.text, "10.0.0.0/8");
  EXPECT_NE(p.refuses(ip("192.168.1.1")), nullptr);
}

TEST(TransferHttpAddresses, AllowPrivateDoesNotOpenAMoreSpecificBlock) {
  AddressPolicy p = hostDefaults();
  p.allow_private.push_back(parseCidr("169.254.0.0/16"));
  EXPECT_EQ(p.refuses(ip("169.254.10.1")), nullptr);
  ASSERT_NE(p.refuses(ip("169.254.169.254")), nullptr);  // the metadata /32 still decides
  EXPECT_EQ(p.refuses(ip("169.254.169.254"))->why, "cloud metadata service");
  p.allow_private.push_back(parseCidr("169.254.169.254/32"));  // named exactly: exempt
  EXPECT_EQ(p.refuses(ip("169.254.169.254")), nullptr);
}

TEST(TransferHttpRules, Defaults) {
  const Rules r = parseRules("{}");
  EXPECT_TRUE(r.allow.empty());
  EXPECT_TRUE(r.addresses.blocked.empty());
  EXPECT_EQ(r.redirects, 3);
  EXPECT_EQ(r.connect_timeout.count(), 10000);
  EXPECT_EQ(r.idle_timeout.count(), 30000);
  EXPECT_EQ(r.timeout.count(), 600000);
  EXPECT_EQ(r.ca_file, "");
  EXPECT_EQ(r.spool_dir, "/var/tmp");
  EXPECT_EQ(r.method_out, "PUT");
}

TEST(TransferHttpRules, ParsesEveryKey) {
  const Rules r = parseRules(R"({
    "allow": ["https://*.example.com/data", "http://10.0.0.1:8080"],
    "blocked": [{"cidr": "10.0.0.0/8", "why": "private network"}, {"cidr": "::1/128"}],
    "allow_private": ["10.0.0.0/24"],
    "redirects": 0, "connect_timeout_ms": 100, "idle_timeout_ms": 200, "timeout_ms": 300,
    "ca_file": "/etc/x.pem", "spool_dir": "/tmp", "method_out": "POST", "future_key": 1})");
  ASSERT_EQ(r.allow.size(), 2u);
  EXPECT_TRUE(r.allow[0].wildcard);
  ASSERT_EQ(r.addresses.blocked.size(), 2u);
  EXPECT_EQ(r.addresses.blocked[1].why, "protected");
  EXPECT_EQ(r.addresses.allow_private.size(), 1u);
  EXPECT_EQ(r.redirects, 0);
  EXPECT_EQ(r.connect_timeout.count(), 100);
  EXPECT_EQ(r.idle_timeout.count(), 200);
  EXPECT_EQ(r.timeout.count(), 300);
  EXPECT_EQ(r.ca_file, "/etc/x.pem");
  EXPECT_EQ(r.spool_dir, "/tmp");
  EXPECT_EQ(r.method_out, "POST");
}

TEST(TransferHttpRules, ErrorsNameTheKey) {
  auto error = [](const char* json) {
    try {
      parseRules(json);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(R"({"allow": ["ftp://x"]})").find("transfer.http.allow[0]"), std::string::npos);
  EXPECT_NE(error(R"({"allow": "https://x"})").find("transfer.http.allow: not an array"),
            std::string::npos);
  EXPECT_NE(error(R"({"blocked": [{"cidr": "10/8"}]})").find("transfer.http.blocked[0]"),
            std::string::npos);
  EXPECT_NE(error(R"({"allow_private": [7]})").find("transfer.http.allow_private[0]"),
            std::string::npos);
  EXPECT_NE(error(R"({"redirects": -1})").find("transfer.http.redirects"), std::string::npos);
  EXPECT_NE(error(R"({"idle_timeout_ms": "5"})").find("transfer.http.idle_timeout_ms"),
            std::string::npos);
  EXPECT_NE(error(R"({"method_out": "PUT /x HTTP/1.1\r\n"})").find("transfer.http.method_out"),
            std::string::npos);
  EXPECT_NE(error("[1]").find("not an object"), std::string::npos);
  EXPECT_NE(error("{").find("not JSON"), std::string::npos);
}

// The policy refusals happen before any connection: testable without a network.
TEST(TransferHttpClient, RefusalsNameTheUrlAndTheRule) {
  Rules r = parseRules(R"({"allow": ["http://127.0.0.1:9"],
                           "blocked": [{"cidr": "127.0.0.0/8", "why": "loopback"}]})");
  auto error = [&](const char* location) {
    try {
      checkedEndpoints(r, parseUrl(location), "'" + redact(location) + "': ");
    } catch (const airlock::sdk::PluginError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("http://127.0.0.2:9/x?sig=1"),
            "'http://127.0.0.2:9/x?\xE2\x80\xA6': not allowed by transfer.http.allow");
  EXPECT_EQ(error("http://u:pw@127.0.0.1:9/x"),
            "'http://127.0.0.1:9/x': 127.0.0.1 is in protected range 127.0.0.0/8 (loopback)");
  r.addresses.allow_private.push_back(parseCidr("127.0.0.1/32"));
  EXPECT_EQ(error("http://127.0.0.1:9/x"), "no error");
}

TEST(TransferHttpClient, UploadChecksAtConstruction) {
  const Rules r = parseRules(R"({"allow": ["https://127.0.0.1"],
                                 "blocked": [{"cidr": "127.0.0.0/8", "why": "loopback"}]})");
  try {
    Upload u(r, "https://127.0.0.1/out.tar?X-Amz-Signature=secret");
    FAIL() << "no error";
  } catch (const airlock::sdk::PluginError& e) {
    EXPECT_STREQ(e.what(),
                 "'https://127.0.0.1/out.tar?\xE2\x80\xA6': 127.0.0.1 is in protected range "
                 "127.0.0.0/8 (loopback)");
    EXPECT_EQ(e.code(), EACCES);
  }
}

}  // namespace
}  // namespace airlock::transfer_http
