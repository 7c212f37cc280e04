// CLI11 registration and reading of the option table's flags (see request_flags_cli.h).
#include "request_flags_cli.h"

namespace vortex::cli {
namespace {

const api::RequestFlag& row(const char* flag) {
  const api::RequestFlag* f = api::find_request_flag(flag);
  if (f == nullptr) throw CLI::ConstructionError(std::string("no option table row for ") + flag, 1);
  return *f;
}

// The given texts of `f`, in command-line order (one "1" for a switch); empty when not given.
std::vector<std::string> given_texts(const CLI::App& sub, const FlagValues& v, const api::RequestFlag& f) {
  const std::string flag = f.flag();
  const bool registered = v.text.count(flag) > 0 || v.repeated.count(flag) > 0 || v.switches.count(flag) > 0;
  const CLI::Option* o = registered ? sub.get_option_no_throw(flag) : nullptr;
  if (o == nullptr || o->count() == 0) return {};
  switch (f.kind) {
    case api::FlagKind::kSwitch:
      return {"1"};
    case api::FlagKind::kRepeated:
      return v.repeated.at(flag);
    case api::FlagKind::kValue:
      break;
  }
  return {v.text.at(flag)};
}

}  // namespace

void add_request_flags(CLI::App* sub, FlagValues& values, const std::vector<FlagUse>& uses) {
  for (const FlagUse& use : uses) {
    const api::RequestFlag& f = row(use.flag);
    const std::string flag = f.flag();
    const std::string help = use.help != nullptr ? use.help : f.help;
    const char* type_name = use.type_name != nullptr ? use.type_name : f.type_name;
    switch (f.kind) {
      case api::FlagKind::kSwitch:
        sub->add_flag(f.names, values.switches[flag], help);
        break;
      case api::FlagKind::kRepeated:
        sub->add_option(f.names, values.repeated[flag], help)->type_name(type_name);
        break;
      case api::FlagKind::kValue:
        sub->add_option(f.names, values.text[flag], help)->type_name(type_name);
        break;
    }
  }
}

OptionList given_flags(const CLI::App& sub, const FlagValues& values, api::FlagScope scope) {
  OptionList list;
  for (const api::RequestFlag& f : api::request_flags()) {
    if (f.scope != scope) continue;
    for (std::string& t : given_texts(sub, values, f)) list.emplace_back(f.flag(), std::move(t));
  }
  return list;
}

Status parse_given_flags(const CLI::App& sub, const FlagValues& values, api::RequestSpec& spec) {
  for (const api::RequestFlag& f : api::request_flags())
    for (const std::string& t : given_texts(sub, values, f))
      VORTEX_RETURN_IF_ERROR(api::apply_request_flag(f, t, spec, FieldStyle::kFlag));
  return Status::Ok();
}

Status parse_given_flag(const CLI::App& sub, const FlagValues& values, const char* flag, api::RequestSpec& spec) {
  const api::RequestFlag& f = row(flag);
  for (const std::string& t : given_texts(sub, values, f))
    VORTEX_RETURN_IF_ERROR(api::apply_request_flag(f, t, spec, FieldStyle::kFlag));
  return Status::Ok();
}

}  // namespace vortex::cli
