// GET /ui: a read-only status page (docs/operations-view.md). Its HTML, script and stylesheet
// are supervisor/api/ui/*, embedded at build time. The files themselves are public; the data the
// script shows comes from the API with the bearer token the operator types into the page.
#pragma once

#include <optional>
#include <string_view>

namespace airlock::api {

struct StatusPageFile {
  std::string_view content_type;
  std::string_view body;
};

// "" (the page itself), "ui.js" or "ui.css"; nullopt for anything else.
std::optional<StatusPageFile> statusPageFile(std::string_view name);

// The headers every answer of /ui carries: a Content-Security-Policy that lets the page load
// only its own script, stylesheet and API (no inline script, no other origin, no framing).
inline constexpr std::string_view kStatusPageCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

}  // namespace airlock::api
