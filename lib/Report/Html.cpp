//===- Html.cpp - The page template and its data --------------------------===//

#include "cleave/Report/Html.h"

#include <fstream>

namespace cleave::report {

namespace {

// ReportTemplate.inc (generated from report.html by CMake) defines
// kTemplate, the page as one raw string literal.
#include "ReportTemplate.inc"

/// Where the JSON and the title go in the template.
constexpr std::string_view kDataMarker = "/*@CLEAVE_DATA@*/";
constexpr std::string_view kTitleMarker = "@CLEAVE_TITLE@";

std::string escapeText(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// `text` with the first `marker` replaced by `value`.
std::string replaceOnce(std::string text, std::string_view marker,
                        std::string_view value) {
  size_t at = text.find(marker);
  if (at != std::string::npos)
    text.replace(at, marker.size(), value);
  return text;
}

} // namespace

std::string_view htmlTemplate() { return kTemplate; }

std::string escapeForScript(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    // U+2028 and U+2029 (E2 80 A8/A9 in UTF-8) end a line in old JavaScript.
    else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
             (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else
      out += c;
  }
  return out;
}

std::string renderHtml(const nlohmann::json &data, const std::string &title) {
  // Invalid UTF-8 in a name is replaced rather than thrown on.
  std::string json =
      data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string page =
      replaceOnce(std::string(kTemplate), kTitleMarker, escapeText(title));
  return replaceOnce(std::move(page), kDataMarker, escapeForScript(json));
}

cost::Result<bool> writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out)
    return cost::Result<bool>::failure("cannot write " + path);
  return true;
}

} // namespace cleave::report
