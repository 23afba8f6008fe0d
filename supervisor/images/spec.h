// An image spec: the TOML file `airlock image build SPEC.toml` reads.
//
//   name = "data-science"
//   [debian]
//   suite = "bookworm"                    # default: the host's (VERSION_CODENAME)
//   mirror = "http://deb.debian.org/debian"  # default: the host's apt sources
//   variant = "apt"                       # mmdebstrap's --variant
//   packages = ["python3", "python3-pandas"]
//
// Every key is checked: an unknown one, a wrong type or a bad value is an error with
// file:line:col, like a policy's. Package names go to mmdebstrap's --include, so nothing that
// could be read as an option or a list separator gets through.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::images {

struct ImageSpec {
  std::string source;  // the file, for messages and the image's metadata
  std::string name;
  std::string suite;   // "": the host's
  std::string mirror;  // "": the host's apt sources
  std::string variant = "apt";
  std::vector<std::string> packages;
};

Result<ImageSpec> parseSpec(std::string_view text, const std::string& source);
Result<ImageSpec> loadSpec(const std::string& path);

// What the image's content is a function of, one canonical text: the resolved suite and mirror,
// the variant and the sorted packages (not the name: two names may share one image).
std::string canonicalSpec(const ImageSpec& spec);

}  // namespace airlock::images
