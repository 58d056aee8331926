// Escaping and number formatting shared by the HTML, SVG and Markdown renderers.
#pragma once

#include <string>
#include <string_view>

namespace detmoe::report {

// Replaces each invalid UTF-8 sequence with U+FFFD, so the page stays valid UTF-8.
std::string valid_utf8(std::string_view s);
// Text or attribute content for HTML and inline SVG: & < > " ' escaped, UTF-8 repaired.
std::string html_escape(std::string_view s);
// A Markdown table cell: inline markup and HTML neutralised, '|' escaped, newlines flattened.
std::string markdown_escape(std::string_view s);
// Three significant digits or so, without exponent for the magnitudes a report holds.
std::string format_value(double v);

}  // namespace detmoe::report
