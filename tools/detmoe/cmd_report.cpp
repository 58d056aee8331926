// detmoe report: render a run report (schema detmoe.run/1) to HTML and Markdown, validate one,
// or print the schema.
//   detmoe report render run.json -o run.html [--markdown run.md]
//   detmoe report validate run.json...
//   detmoe report merge shard0.json shard1.json ... -o campaign.json
//   detmoe report schema
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "detmoe/output_file.h"
#include "detmoe/report.h"
#include "output_paths.h"

namespace detmoe::cli {
namespace {

struct RenderArgs {
  std::string input, html_path, markdown_path;
};

// run.json -> run.html
std::string sibling_with_extension(const std::string& path, const std::string& ext) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? path.substr(0, dot) : path) + ext;
}

int run_render(const RenderArgs& a) {
  const std::string html = a.html_path.empty() ? sibling_with_extension(a.input, ".html") : a.html_path;
  refuse_same_file(a.html_path.empty() ? "the default output" : "-o", html, "the input", a.input);
  refuse_same_file("--markdown", a.markdown_path, "the input", a.input);
  refuse_same_file("--markdown", a.markdown_path, a.html_path.empty() ? "the default output" : "-o", html,
                   "one output would overwrite the other");
  const report::RunReport r = report::load_run_report(a.input).value();
  throw_if_error(write_output_file(html, report::render_html(r)));
  fmt::print("wrote {}\n", html);
  if (!a.markdown_path.empty()) {
    throw_if_error(write_output_file(a.markdown_path, report::render_markdown(r)));
    fmt::print("wrote {}\n", a.markdown_path);
  }
  return kExitOk;
}

// Exit 1 when any file is not a valid report, 3 when one cannot be read at all.
int run_validate(const std::vector<std::string>& inputs) {
  int rc = kExitOk;
  for (const std::string& path : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      fmt::print(stderr, "{}: is a directory, not a report\n", path);
      rc = kExitCouldNotRun;
      continue;
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      fmt::print(stderr, "{}: cannot open: {}\n", path, std::strerror(errno));
      rc = kExitCouldNotRun;
      continue;
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(f);
    } catch (const nlohmann::json::parse_error& e) {
      fmt::print("{}: not JSON: {}\n", path, e.what());
      rc = std::max(rc, kExitCheckFailed);
      continue;
    }
    const auto violations = report::validate_run_json(doc);
    if (violations.empty()) {
      fmt::print("{}: valid {}\n", path, report::kRunSchemaId);
      continue;
    }
    rc = std::max(rc, kExitCheckFailed);
    fmt::print("{}: {} problem(s)\n", path, violations.size());
    for (const auto& v : violations) fmt::print("  {}: {}\n", v.path, v.message);
  }
  return rc;
}

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
};

// The shards of one campaign as one report (report::merge_run_reports); prints the verdict counts.
int run_merge(const MergeArgs& a) {
  check_output_path("-o", a.output);
  for (const std::string& in : a.inputs) refuse_same_file("-o", a.output, "an input", in);
  std::vector<report::RunReport> shards;
  for (const std::string& in : a.inputs) {
    auto r = report::load_run_report(in);
    if (!r.ok()) throw Error(Status(r.status().code(), in + ": " + r.status().message()));
    shards.push_back(std::move(*r));
  }
  auto merged = report::merge_run_reports(shards);
  if (!merged.ok()) throw Error(merged.status());
  throw_if_error(report::save_run_report(a.output, *merged));
  std::map<std::string, int64_t> verdicts;
  for (const report::CheckResult& c : merged->checks) ++verdicts[report::to_string(c.verdict)];
  std::string counts;
  for (const auto& [verdict, n] : verdicts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, verdict);
  fmt::print("wrote {}: {} reports, {} checks ({}), state {}\n", a.output, shards.size(), merged->checks.size(),
             counts.empty() ? "none" : counts, report::to_string(merged->run.state));
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, Action& run) {
  CLI::App* cmd = app.add_subcommand("report", "render a run's JSON report to HTML and Markdown; validate reports; print the schema");
  cmd->require_subcommand(1);

  auto render = std::make_shared<RenderArgs>();
  CLI::App* r = cmd->add_subcommand("render", "render run.json to one self-contained HTML page (inline SVG plots), and Markdown");
  r->add_option("input", render->input, "a detmoe.run/1 JSON report")->required();
  r->add_option("-o,--output", render->html_path, "HTML file to write (default: the input with .html)");
  r->add_option("--markdown", render->markdown_path, "also write a Markdown summary here");
  r->callback([render, &run] { run = [render] { return run_render(*render); }; });

  auto inputs = std::make_shared<std::vector<std::string>>();
  CLI::App* v = cmd->add_subcommand("validate", "check reports against the schema; list each problem with its JSON path");
  v->add_option("inputs", *inputs, "JSON reports")->required();
  v->callback([inputs, &run] { run = [inputs] { return run_validate(*inputs); }; });

  auto merge = std::make_shared<MergeArgs>();
  CLI::App* m = cmd->add_subcommand("merge", "one report from the shards of one campaign (same command, commit and machine)");
  m->add_option("inputs", merge->inputs, "detmoe.run/1 reports, in order")->required();
  m->add_option("-o,--output", merge->output, "the merged report")->required();
  m->callback([merge, &run] { run = [merge] { return run_merge(*merge); }; });

  CLI::App* s = cmd->add_subcommand("schema", "print the JSON Schema of run reports (detmoe.run/1)");
  s->callback([&run] {
    run = [] {
      fmt::print("{}", report::run_schema_text());
      return kExitOk;
    };
  });
}

}  // namespace detmoe::cli
