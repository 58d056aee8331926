// Inline SVG plots for the HTML report: grouped bar charts and a heat map. Plain SVG 1.1 (no
// script, no external fonts); every label is escaped; each <svg> carries data-plot="<id>" so
// tests and readers can find it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report_views.h"

namespace detmoe::report {

struct BarChart {
  std::string id;     // data-plot attribute
  std::string title;
  std::string y_label;
  std::string value_suffix;  // appended to bar labels ("%")
  PlotData data;
  std::optional<double> reference;  // a dashed horizontal line (ceiling, 100 %)
  std::string reference_label;
};
std::string bar_chart_svg(const BarChart& chart);

struct HeatMap {
  std::string id, title, unit;
  std::vector<std::string> labels;                        // rows (from) and columns (to)
  std::vector<std::vector<std::optional<double>>> values;  // [row][column]
  std::optional<double> full_scale;                       // value drawn fully green; default: the max
  std::string full_scale_label;
};
std::string heat_map_svg(const HeatMap& map);

}  // namespace detmoe::report
