// Image specs (supervisor/images/spec.h): what `airlock image build` accepts, and that every
// mistake is an error naming the key with file:line:col.
#include <gtest/gtest.h>

#include "supervisor/images/spec.h"

namespace airlock::images {
namespace {

std::string errorOf(const std::string& text) {
  auto s = parseSpec(text, "spec.toml");
  return s ? "" : s.error().message();
}

TEST(ImageSpec, FullSpecParses) {
  auto s = parseSpec(R"(name = "data-science"
[debian]
suite = "bookworm"
mirror = "http://deb.debian.org/debian"
variant = "essential"
packages = ["python3", "python3-pandas", "libc6:amd64", "tzdata=2024a-0+deb12u1"]
)",
                     "spec.toml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->name, "data-science");
  EXPECT_EQ(s->suite, "bookworm");
  EXPECT_EQ(s->mirror, "http://deb.debian.org/debian");
  EXPECT_EQ(s->variant, "essential");
  EXPECT_EQ(s->packages.size(), 4u);
}

TEST(ImageSpec, DefaultsLeaveSuiteAndMirrorToTheHost) {
  auto s = parseSpec("name = \"tiny\"\n", "spec.toml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->suite, "");
  EXPECT_EQ(s->mirror, "");
  EXPECT_EQ(s->variant, "apt");
  EXPECT_TRUE(s->packages.empty());
}

TEST(ImageSpec, UnknownTopLevelKeyNamesKeyAndLine) {
  EXPECT_EQ(errorOf("name = \"x\"\n\nrelease = \"bookworm\"\n"),
            "spec.toml:3:1: unknown key 'release' in the image spec (known: name, [debian])");
}

TEST(ImageSpec, UnknownDebianKeyNamesKeyAndLine) {
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\nsuite = \"bookworm\"\n  packges = [\"python3\"]\n"),
            "spec.toml:4:3: unknown key 'packges' in [debian] (known: suite, mirror, variant, "
            "packages; pip and npm packages are not supported yet)");
}

TEST(ImageSpec, UnknownTableIsAnUnknownKey) {
  EXPECT_EQ(errorOf("name = \"x\"\n[pip]\npackages = [\"numpy\"]\n"),
            "spec.toml:2:2: unknown key 'pip' in the image spec (known: name, [debian])");
}

TEST(ImageSpec, BadValuesNameKeyAndPosition) {
  EXPECT_EQ(errorOf("[debian]\n"), "spec.toml: name: missing (the image's name in the store)");
  EXPECT_EQ(errorOf("name = \"Data/Science\"\n"),
            "spec.toml:1:8: name = 'Data/Science': an image name has only lowercase letters, "
            "digits, '.', '_' and '-'");
  EXPECT_EQ(errorOf("name = 3\n"), "spec.toml:1:8: name: expected a string");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\npackages = [\"--allow-unauthenticated\"]\n"),
            "spec.toml:3:13: debian.packages[0] = '--allow-unauthenticated': a Debian package "
            "name (lowercase letters, digits, + - . and an optional =version or :arch)");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\npackages = [\"a,b\"]\n"),
            "spec.toml:3:13: debian.packages[0] = 'a,b': a Debian package name (lowercase "
            "letters, digits, + - . and an optional =version or :arch)");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\npackages = [\"vim\", \"vim\"]\n"),
            "spec.toml:3:20: debian.packages[1] = 'vim': listed twice");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\nvariant = \"fat\"\n"),
            "spec.toml:3:11: debian.variant = 'fat': one of essential, apt, minbase, required, "
            "important, standard");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\nmirror = \"ftp://x\"\n"),
            "spec.toml:3:10: debian.mirror = 'ftp://x': an http(s):// or file:/ URL, or an "
            "absolute path to a .list or .sources file");
  EXPECT_EQ(errorOf("name = \"x\"\n[debian]\nsuite = \"../etc\"\n"),
            "spec.toml:3:9: debian.suite = '../etc': a suite or codename (lowercase letters, "
            "digits, '-')");
}

TEST(ImageSpec, SyntaxErrorHasAPosition) {
  EXPECT_TRUE(errorOf("name = \n").starts_with("spec.toml:1:")) << errorOf("name = \n");
}

TEST(ImageSpec, CanonicalFormIgnoresNameAndPackageOrder) {
  auto a = parseSpec("name = \"a\"\n[debian]\npackages = [\"b\", \"a\"]\n", "a.toml");
  auto b = parseSpec("name = \"b\"\n[debian]\npackages = [\"a\", \"b\"]\n", "b.toml");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(canonicalSpec(*a), canonicalSpec(*b));
}

}  // namespace
}  // namespace airlock::images
