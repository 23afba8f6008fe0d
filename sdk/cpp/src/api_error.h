// Turns the supervisor's error answers (docs/api.md, Conventions) into typed Errors.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "airlock/client/error.h"

namespace airlock::sdk {

// `body` is the answer's text: {"error": {"code", "message", "review"?}} or anything else.
Error errorFromAnswer(unsigned status, std::string_view reason, const std::string& body);

// The review object of an error body or of an `end`/`exit` event.
Review reviewFromJson(const nlohmann::json& review);

}  // namespace airlock::sdk
