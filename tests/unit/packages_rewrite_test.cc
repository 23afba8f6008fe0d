// Index pages and packuments as pure functions (supervisor/packages/pypi_index.h,
// npm_packument.h, serving.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "supervisor/packages/npm_packument.h"
#include "supervisor/packages/pypi_index.h"
#include "supervisor/packages/serving.h"

namespace airlock::packages {
namespace {

TEST(PackagesPypiIndex, ParsesAnchorsTolerantly) {
  const std::string html = R"(<!DOCTYPE html><html><body><h1>Links for demo</h1>
<a href="../../packages/aa/demo-1.0-py3-none-any.whl#sha256=ABCDEF" data-requires-python="&gt;=3.8"
   data-dist-info-metadata="sha256=123">demo-1.0-py3-none-any.whl</a><br/>
<A HREF='https://files.example/demo-1.1.tar.gz#sha256=0011' data-yanked>
  demo-1.1.tar.gz </A>
<a href=demo-0.9.zip data-yanked="broken &amp; bad">demo-0.9.zip</a>
<a name="no-href">skipped</a><a href="x.whl"></a>
<abbr>not an anchor</abbr>
</body></html>)";
  const auto links = parseIndexLinks(html);
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(links[0].href, "../../packages/aa/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(links[0].sha256, "abcdef");
  EXPECT_EQ(links[0].requires_python, ">=3.8");
  EXPECT_FALSE(links[0].yanked);
  EXPECT_EQ(links[1].filename, "demo-1.1.tar.gz");
  EXPECT_EQ(links[1].href, "https://files.example/demo-1.1.tar.gz");
  EXPECT_EQ(links[1].sha256, "0011");
  EXPECT_TRUE(links[1].yanked);
  EXPECT_EQ(links[1].yanked_reason, "");
  EXPECT_EQ(links[2].href, "demo-0.9.zip");
  EXPECT_EQ(links[2].sha256, "");
  EXPECT_EQ(links[2].yanked_reason, "broken & bad");
}

TEST(PackagesPypiIndex, SurvivesTruncatedPages) {
  EXPECT_TRUE(parseIndexLinks("<a href=\"x").empty());
  EXPECT_TRUE(parseIndexLinks("<a href=x>x-1.0.tar.gz").empty());
  EXPECT_TRUE(parseIndexLinks("<a").empty());
  EXPECT_EQ(parseIndexLinks("<a href=a>a-1.whl</a><a href='b").size(), 1u);
}

TEST(PackagesPypiIndex, ClassifiesFiles) {
  struct Case {
    const char *project, *file;
    DistKind kind;
    const char* version;
  };
  const Case cases[] = {
      {"numpy", "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl", DistKind::wheel, "1.26.4"},
      {"zope.interface", "zope.interface-6.0-cp311-cp311-linux_x86_64.whl", DistKind::wheel, "6.0"},
      {"torch", "torch-2.1.0+cpu-1-cp311-none-linux_x86_64.whl", DistKind::wheel, "2.1.0+cpu"},
      {"numpy", "numpy-1.26.4.tar.gz", DistKind::sdist, "1.26.4"},
      {"python-dateutil", "python-dateutil-2.8.2.tar.gz", DistKind::sdist, "2.8.2"},
      {"python-dateutil", "python_dateutil-2.9.0.tar.gz", DistKind::sdist, "2.9.0"},
      {"demo", "demo-0.9.zip", DistKind::sdist, "0.9"},
      {"demo", "Demo-1.0rc1.TAR.GZ", DistKind::sdist, "1.0rc1"},
      {"demo", "demo-1.0-py2.7.egg", DistKind::other, ""},
      {"demo", "demo.whl", DistKind::other, ""},
  };
  for (const Case& c : cases) {
    const DistFile f = classifyDistFile(c.project, c.file);
    EXPECT_EQ(f.kind, c.kind) << c.file;
    EXPECT_EQ(f.version, c.version) << c.file;
  }
}

TEST(PackagesPypiIndex, PlausibleFilenames) {
  EXPECT_TRUE(plausibleDistFilename("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl"));
  EXPECT_TRUE(plausibleDistFilename("torch-2.1.0+cpu-cp311-none-linux_x86_64.whl"));
  for (const char* bad : {"", "../../etc/passwd", "a/b.whl", ".hidden.whl", "a b.whl",
                          "http:", "a%2fb.whl", "a\\b.whl"})
    EXPECT_FALSE(plausibleDistFilename(bad)) << bad;
}

TEST(PackagesPypiIndex, RendersLinksToTheProxy) {
  IndexLink a;
  a.filename = "demo-1.0-py3-none-any.whl";
  a.sha256 = "abc";
  a.requires_python = ">=3.8";
  IndexLink b;
  b.filename = "demo-1.1.tar.gz";
  b.yanked = true;
  b.yanked_reason = "bad \"one\"";
  const std::string page =
      renderIndexPage("demo", {a, b}, "http://127.0.0.1:3141/pypi/files/demo/");
  EXPECT_NE(page.find("<a href=\"http://127.0.0.1:3141/pypi/files/demo/"
                      "demo-1.0-py3-none-any.whl#sha256=abc\" data-requires-python=\"&gt;=3.8\">"
                      "demo-1.0-py3-none-any.whl</a>"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("<a href=\"http://127.0.0.1:3141/pypi/files/demo/demo-1.1.tar.gz\" "
                      "data-yanked=\"bad &quot;one&quot;\">demo-1.1.tar.gz</a>"),
            std::string::npos)
      << page;
  EXPECT_EQ(page.find("metadata\""), std::string::npos);
  // What the proxy writes, it reads back the same.
  const auto back = parseIndexLinks(page);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].requires_python, ">=3.8");
  EXPECT_EQ(back[1].yanked_reason, "bad \"one\"");
}

TEST(PackagesPypiIndex, Entities) {
  EXPECT_EQ(htmlUnescape("a&amp;b&lt;&gt;&quot;&#39;&#x41;&#66;&nosuch;&"), "a&b<>\"'AB&nosuch;&");
  EXPECT_EQ(htmlUnescape("&#x1F600;"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(htmlEscape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

const char* kPackument = R"({
  "name": "left-pad",
  "dist-tags": {"latest": "1.3.0", "old": "1.0.0", "next": "2.0.0-beta.1"},
  "versions": {
    "1.0.0": {"name": "left-pad", "version": "1.0.0",
              "dist": {"tarball": "https://registry.example/left-pad/-/left-pad-1.0.0.tgz",
                       "shasum": "ABC1", "integrity": "sha512-AAA=="}},
    "1.3.0": {"name": "left-pad", "version": "1.3.0",
              "dist": {"tarball": "https://registry.example/left-pad/-/left-pad-1.3.0.tgz",
                       "integrity": "sha1-xx sha512-BBB==?opt"}},
    "2.0.0-beta.1": {"name": "left-pad", "version": "2.0.0-beta.1",
              "dist": {"tarball": "https://registry.example/left-pad/-/left-pad-2.0.0-beta.1.tgz"}}
  },
  "time": {"created": "2016", "1.0.0": "2016", "1.3.0": "2017", "2.0.0-beta.1": "2018"}
})";

TEST(PackagesNpm, FiltersVersionsAndRewritesTarballs) {
  auto out = rewritePackument(kPackument, "http://127.0.0.1:3141/npm/-/files/left-pad/",
                              [](const std::string& v) { return v == "1.3.0"; });
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_FALSE(out->kept_all_refused);
  const auto doc = nlohmann::json::parse(out->body);
  ASSERT_EQ(doc["versions"].size(), 1u);
  EXPECT_EQ(doc["versions"]["1.3.0"]["dist"]["tarball"],
            "http://127.0.0.1:3141/npm/-/files/left-pad/1.3.0.tgz");
  EXPECT_EQ(doc["dist-tags"], nlohmann::json({{"latest", "1.3.0"}}));
  EXPECT_EQ(doc["time"], nlohmann::json({{"created", "2016"}, {"1.3.0", "2017"}}));
  ASSERT_EQ(out->tarballs.size(), 3u);  // refused ones too: their download names the rule
  EXPECT_EQ(out->tarballs[0].version, "1.0.0");
  EXPECT_EQ(out->tarballs[0].url, "https://registry.example/left-pad/-/left-pad-1.0.0.tgz");
  EXPECT_EQ(out->tarballs[0].shasum, "ABC1");
  EXPECT_EQ(sha512FromIntegrity(out->tarballs[1].integrity), "BBB==");
}

TEST(PackagesNpm, KeepsEverythingWhenEverythingIsRefused) {
  auto out = rewritePackument(kPackument, "http://h/npm/-/files/left-pad/",
                              [](const std::string&) { return false; });
  ASSERT_TRUE(out);
  EXPECT_TRUE(out->kept_all_refused);
  const auto doc = nlohmann::json::parse(out->body);
  EXPECT_EQ(doc["versions"].size(), 3u);
  EXPECT_EQ(doc["dist-tags"].size(), 3u);
  EXPECT_EQ(doc["versions"]["1.0.0"]["dist"]["tarball"], "http://h/npm/-/files/left-pad/1.0.0.tgz");
}

TEST(PackagesNpm, RefusesWhatIsNotAPackument) {
  const auto all = [](const std::string&) { return true; };
  EXPECT_FALSE(rewritePackument("not json", "b/", all));
  EXPECT_FALSE(rewritePackument("[]", "b/", all));
  EXPECT_FALSE(rewritePackument("{}", "b/", all));
  EXPECT_FALSE(rewritePackument(R"({"versions": {"1.0.0": 3}})", "b/", all));
}

TEST(PackagesNpm, Names) {
  EXPECT_EQ(npmPathSegment("@types/node"), "@types%2fnode");
  EXPECT_EQ(npmPathSegment("left-pad"), "left-pad");
  for (const char* good : {"left-pad", "@types/node", "lodash.merge", "JSONStream"})
    EXPECT_TRUE(plausibleNpmName(good)) << good;
  for (const char* bad :
       {"", "@types", "@/x", "../x", "a/b", ".x", "_x", "@t/../x", "a b", "http://x"})
    EXPECT_FALSE(plausibleNpmName(bad)) << bad;
}

TEST(PackagesServing, ReasonPhrasesAndHosts) {
  EXPECT_EQ(sanitizeReasonPhrase("a\r\nb\x01\xc3\xa9"), "a??b???");
  EXPECT_EQ(sanitizeReasonPhrase(std::string(400, 'x')).size(), 300u);
  EXPECT_TRUE(plausibleHost("127.0.0.1:3141"));
  EXPECT_TRUE(plausibleHost("[::1]:3141"));
  EXPECT_FALSE(plausibleHost("evil\"><script>"));
  EXPECT_FALSE(plausibleHost("a/b"));
  EXPECT_FALSE(plausibleHost(""));
}

}  // namespace
}  // namespace airlock::packages
