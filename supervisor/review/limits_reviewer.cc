#include "supervisor/review/limits_reviewer.h"

#include <algorithm>
#include <cstring>

namespace airlock::review {

bool isTextUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    unsigned char c = *p;
    if (c == 0) return false;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    p += n + 1;
  }
  return true;
}

Result<Verdict> LimitsReviewer::review(const Subject& subject) {
  // A transfer's size, files and depth have limits of their own ([profiles.X.transfer]); its
  // listing is not code to cap by lines.
  if (subject.kind == SubjectKind::kTransfer) return allow();
  const std::string& text = subject.text;
  if (text.size() > limits_.max_bytes) {
    return decide(Decision::kDeny, "max_bytes",
                  "the " + std::string(kindName(subject.kind)) + " is " +
                      std::to_string(text.size()) + " bytes, above this profile's limit of " +
                      std::to_string(limits_.max_bytes));
  }
  // memchr-driven: counts a 1 MiB text in well under a millisecond.
  uint64_t lines = text.empty() ? 0 : 1;
  for (const char* p = text.data(); (p = static_cast<const char*>(std::memchr(
                                         p, '\n', text.data() + text.size() - p))) != nullptr;) {
    ++p;
    if (p != text.data() + text.size()) ++lines;
  }
  if (lines > limits_.max_lines) {
    return decide(Decision::kDeny, "max_lines",
                  "the " + std::string(kindName(subject.kind)) + " has " + std::to_string(lines) +
                      " lines, above this profile's limit of " + std::to_string(limits_.max_lines));
  }
  if (!limits_.allow_binary && !isTextUtf8(text)) {
    return decide(
        Decision::kDeny, "binary",
        "the " + std::string(kindName(subject.kind)) + " contains NUL bytes or is not valid UTF-8");
  }
  return allow();
}

}  // namespace airlock::review
