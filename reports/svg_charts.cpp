#include "svg_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "html_text.h"

namespace detmoe::report {
namespace {

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
const char* const kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"};
const char* const kMuted[] = {"#8c8c8c", "#b5b5b5", "#5f5f5f", "#d0d0d0"};

// 1, 2, 2.5 or 5 times a power of ten, at least raw.
double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// Rough width of a label at the given font size; only used to wrap the legend.
double text_width(const std::string& s, double font_px) { return 0.6 * font_px * static_cast<double>(s.size()); }

std::string svg_open(const std::string& id, const std::string& title, double w, double h) {
  return fmt::format(
      "<svg class=\"plot\" data-plot=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{1}\" "
      "width=\"{2:.0f}\" height=\"{3:.0f}\" viewBox=\"0 0 {2:.0f} {3:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{1}</title>\n<rect class=\"background\" x=\"0\" y=\"0\" width=\"{2:.0f}\" height=\"{3:.0f}\" fill=\"#ffffff\"/>\n"
      "<text x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{1}</text>\n",
      html_escape(id), html_escape(title), w, h);
}

// Red (0) -> yellow (0.5) -> green (1).
std::string heat_colour(double f) {
  f = std::clamp(f, 0.0, 1.0);
  const double lo[3] = {215, 48, 39}, mid[3] = {254, 224, 139}, hi[3] = {26, 152, 80};
  double c[3];
  for (int k = 0; k < 3; ++k) c[k] = f < 0.5 ? lo[k] + (mid[k] - lo[k]) * f * 2 : mid[k] + (hi[k] - mid[k]) * (f - 0.5) * 2;
  return fmt::format("#{:02x}{:02x}{:02x}", int(std::lround(c[0])), int(std::lround(c[1])), int(std::lround(c[2])));
}

}  // namespace

std::string bar_chart_svg(const BarChart& chart) {
  const PlotData& d = chart.data;
  const std::size_t n_cat = d.categories.size(), n_ser = std::max<std::size_t>(d.series.size(), 1);
  const double bar_w = n_ser > 4 ? 14 : 22, group_gap = 18;
  const double left = 64, right = 24, plot_h = 220;
  const double width = std::max(560.0, left + n_cat * (n_ser * bar_w + group_gap) + right);
  // Groups share the width evenly; bars keep their width and sit in the middle of their group.
  const double group_w = n_cat > 0 ? (width - left - right) / n_cat : width - left - right;

  // Legend rows, wrapped to the width.
  struct Item { double x; int row; };
  std::vector<Item> legend;
  double x = left;
  int rows = 1;
  for (const PlotSeries& s : d.series) {
    const double w = 18 + text_width(s.name + (s.baseline ? " (baseline)" : ""), 12) + 16;
    if (x + w > width - right && x > left) { x = left; ++rows; }
    legend.push_back({x, rows - 1});
    x += w;
  }
  const double legend_top = 34, top = legend_top + rows * 18 + 14;
  std::size_t longest = 0;
  for (const std::string& c : d.categories) longest = std::max(longest, c.size());
  const double bottom = 24 + std::min<double>(longest, 40) * 6.0 * 0.5 + 12;  // labels at -30°
  const double height = top + plot_h + bottom;

  double max_v = chart.reference.value_or(0);
  for (const PlotSeries& s : d.series)
    for (const auto& v : s.values)
      if (v && std::isfinite(*v)) max_v = std::max(max_v, *v);
  const double step = nice_step(max_v > 0 ? max_v * 1.08 / 5 : 1);
  const double y_max = step * std::max(1.0, std::ceil(max_v * 1.08 / step));
  const auto y_of = [&](double v) { return top + plot_h - std::clamp(v, 0.0, y_max) / y_max * plot_h; };

  std::string o = svg_open(chart.id, chart.title, width, height);
  for (std::size_t i = 0; i < d.series.size(); ++i) {
    const PlotSeries& s = d.series[i];
    const double ly = legend_top + legend[i].row * 18;
    o += fmt::format("<g class=\"legend\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{}{}</text></g>\n",
                     legend[i].x, ly, s.baseline ? kMuted[i % 4] : kPalette[i % 8], legend[i].x + 17, ly + 10.5,
                     html_escape(s.name), s.baseline ? " (baseline)" : "");
  }
  // Grid and y axis.
  for (double t = 0; t <= y_max + step / 2; t += step) {
    const double y = y_of(t);
    o += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n",
                     left, y, width - right, y, left - 6, y + 4, t == std::floor(t) ? fmt::format("{:.0f}", t) : format_value(t));
  }
  o += fmt::format("<text x=\"14\" y=\"{:.1f}\" transform=\"rotate(-90 14 {:.1f})\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n",
                   top + plot_h / 2, top + plot_h / 2, html_escape(chart.y_label));
  o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#444\"/>\n", left, top + plot_h,
                   width - right);
  // Bars.
  for (std::size_t c = 0; c < n_cat; ++c) {
    const double gx = left + c * group_w + (group_w - n_ser * bar_w) / 2;
    for (std::size_t s = 0; s < d.series.size(); ++s) {
      const auto& v = d.series[s].values[c];
      if (!v || !std::isfinite(*v)) continue;
      const double bx = gx + s * bar_w, by = y_of(*v), bh = top + plot_h - by;
      const std::string label = format_value(*v) + chart.value_suffix;
      o += fmt::format("<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
                       "<title>{} · {}: {}</title></rect>\n",
                       bx + 1, by, bar_w - 2, bh, d.series[s].baseline ? kMuted[s % 4] : kPalette[s % 8],
                       html_escape(d.series[s].name), html_escape(d.categories[c]), html_escape(label));
      o += fmt::format("<text class=\"value\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"#222\">{}</text>\n",
                       bx + bar_w / 2, by - 3, html_escape(format_value(*v)));
    }
    const double lx = gx + n_ser * bar_w / 2, ly = top + plot_h + 14;
    o += fmt::format("<text class=\"category\" x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"end\" transform=\"rotate(-30 {0:.1f} {1:.1f})\">{2}</text>\n",
                     lx, ly, html_escape(d.categories[c]));
  }
  if (chart.reference) {
    const double y = y_of(*chart.reference);
    o += fmt::format("<line class=\"reference\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#c00\" "
                     "stroke-dasharray=\"6 4\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" fill=\"#c00\">{5}</text>\n",
                     left, y, width - right, width - right - 2, y - 4, html_escape(chart.reference_label));
  }
  return o + "</svg>\n";
}

std::string heat_map_svg(const HeatMap& m) {
  const std::size_t n = m.labels.size();
  const double cell_w = 68, cell_h = 40, left = 84, top = 70;
  double scale = m.full_scale.value_or(0);
  if (!(scale > 0))
    for (const auto& row : m.values)
      for (const auto& v : row)
        if (v && std::isfinite(*v)) scale = std::max(scale, *v);
  if (!(scale > 0)) scale = 1;
  const double key_w = 22;
  const std::string key_label = format_value(scale) + " " + m.unit + (m.full_scale_label.empty() ? "" : " (" + m.full_scale_label + ")");
  const double width = std::max({360.0, left + n * cell_w + 24, left + 10 * key_w + 6 + text_width(key_label, 12) + 16});
  const double height = top + n * cell_h + 70;

  std::string o = svg_open(m.id, m.title, width, height);
  o += fmt::format("<text x=\"{:.1f}\" y=\"42\" text-anchor=\"middle\" fill=\"#444\">to</text>\n", left + n * cell_w / 2);
  o += fmt::format("<text x=\"16\" y=\"{0:.1f}\" transform=\"rotate(-90 16 {0:.1f})\" text-anchor=\"middle\" fill=\"#444\">from</text>\n",
                   top + n * cell_h / 2);
  for (std::size_t i = 0; i < n; ++i) {
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + i * cell_w + cell_w / 2,
                     top - 8, html_escape(m.labels[i]));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8,
                     top + i * cell_h + cell_h / 2 + 4, html_escape(m.labels[i]));
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::optional<double> v = i < m.values.size() && j < m.values[i].size() ? m.values[i][j] : std::nullopt;
      const bool has = v && std::isfinite(*v);
      const double x = left + j * cell_w, y = top + i * cell_h;
      const std::string text = has ? format_value(*v) : "—";
      o += fmt::format("<rect class=\"cell\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#fff\">"
                       "<title>{} → {}: {} {}</title></rect>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       x, y, cell_w, cell_h, has ? heat_colour(*v / scale) : "#eeeeee", html_escape(m.labels[i]),
                       html_escape(m.labels[j]), html_escape(text), has ? html_escape(m.unit) : "", x + cell_w / 2,
                       y + cell_h / 2 + 4, html_escape(text));
    }
  }
  // Colour key: ten steps from 0 to full scale.
  const double ky = top + n * cell_h + 22;
  for (int k = 0; k < 10; ++k)
    o += fmt::format("<rect class=\"key\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"12\" fill=\"{}\"/>", left + k * key_w,
                     ky, key_w, heat_colour((k + 0.5) / 10));
  o += fmt::format("\n<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">0</text>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"start\" fill=\"#444\">{}</text>\n",
                   left - 6, ky + 10, left + 10 * key_w + 6, ky + 10, html_escape(key_label));
  return o + "</svg>\n";
}

}  // namespace detmoe::report
