// GET /v1/openapi.json: supervisor/api/openapi.json, embedded at build time.
#pragma once

#include <string_view>

namespace airlock::api {

std::string_view openApiDocument();

}  // namespace airlock::api
