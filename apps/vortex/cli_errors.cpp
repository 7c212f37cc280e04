// CLI11 parse errors reworded (see cli_errors.h).
#include "cli_errors.h"

#include <algorithm>
#include <map>

namespace vortex::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every option name ("--steps", "-o") of `sub` and of the top level (whose options fall through).
std::vector<std::string> option_names(const CLI::App& app, const CLI::App* sub) {
  std::vector<std::string> names;
  for (const CLI::App* a : {sub, &app}) {
    if (a == nullptr) continue;
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    }
  }
  return names;
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best.empty() && word.size() >= 4) {
    for (const std::string& c : candidates)
      if (c.rfind(word, 0) == 0) return c;
    // "--tiling" -> "--no-tiling": the word without its dashes inside a longer option name.
    const std::string bare =
        word.substr(word.find_first_not_of('-') == std::string::npos ? 0 : word.find_first_not_of('-'));
    for (const std::string& c : candidates)
      if (bare.size() >= 4 && c.size() > word.size() && c.find("-" + bare) != std::string::npos) return c;
  }
  return best;
}

std::string describe_parse_error(const CLI::ParseError& e, const CLI::App& app, const CLI::App* sub, int argc,
                                 char** argv) {
  const std::string who = sub ? "vortex " + sub->get_name() : std::string("vortex");
  const std::vector<std::string> names = option_names(app, sub);
  std::string lines;
  auto add = [&](const std::string& m) { lines += who + ": error: " + m + "\n"; };
  const std::string what = e.what();
  const int first = sub ? 2 : 1;  // argv words after the command name
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // Each unexpected word: an unknown option (with the nearest known one) or a stray value.
    bool any = false;
    for (int i = first; i < argc; ++i) {
      std::string w = argv[i];
      if (w.size() < 2 || w[0] != '-' || w == "--") continue;
      const std::string flag = w.substr(0, w.find('='));
      if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
      const std::string near = flag.size() >= 4 ? nearest(flag, names) : "";  // no guesses for "-x"
      add("unknown option " + flag + (near.empty() ? "" : " (did you mean " + near + "?)"));
      any = true;
    }
    if (!any) add(what.substr(0, 1) == "T" ? "unexpected arguments: " + what.substr(what.find(':') + 2) : what);
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // "At Most 1 required but received 2": an option given twice (under any of its names, -o and --out).
    std::map<const CLI::Option*, int> seen;
    for (int i = first; i < argc; ++i) {
      std::string w = argv[i];
      if (w.size() < 2 || w[0] != '-') continue;
      const std::string flag = w.substr(0, w.find('='));
      const CLI::Option* o = sub ? sub->get_option_no_throw(flag) : app.get_option_no_throw(flag);
      if (o != nullptr) ++seen[o];
    }
    bool any = false;
    for (const auto& [o, n] : seen) {
      if (n > 1 && o->get_expected_max() == 1 && o->get_type_size() != 0) {
        add(o->get_name() + " was given " + std::to_string(n) + " times; give it once");
        any = true;
      }
    }
    if (!any) add(what);
  } else if (sub != nullptr && !sub->get_subcommands({}).empty() && what.find("subcommand") != std::string::npos) {
    // A command with modes (`bench block|step|run`): name the word given and the modes.
    std::string modes;
    for (const CLI::App* m : sub->get_subcommands({})) modes += (modes.empty() ? "" : ", ") + m->get_name();
    const std::string given = argc > first && argv[first][0] != '-' ? argv[first] : "";
    add((given.empty() ? "a mode is required" : "unknown " + sub->get_name() + " mode '" + given + "'") +
        "; one of: " + modes);
  } else {
    add(what);
  }
  lines += "  (" + std::string(sub ? "vortex help " + sub->get_name() : "vortex help") + " lists the options)\n";
  return lines;
}

}  // namespace vortex::cli
