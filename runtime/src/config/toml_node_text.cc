// config_internal's TOML node text (toml_node_text.h).
#include "runtime/src/config/toml_node_text.h"

#include <sstream>

#include "runtime/src/config/config_keys.h"

namespace zdp::config_internal {

const char* node_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string node_text(const toml::node& node) {
  std::ostringstream os;
  if (const auto* s = node.as_string()) return toml_quote(s->get());
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return format_float(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = node.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + node_text(*a->get(i));
    return out + "]";
  }
  if (const auto* t = node.as_table()) {
    std::string out = "{";
    for (auto&& [k, v] : *t) out += (out.size() > 1 ? ", " : " ") + std::string(k.str()) + " = " + node_text(v);
    return out + (t->empty() ? "}" : " }");
  }
  if (const auto* d = node.as_date()) os << d->get();
  if (const auto* t = node.as_time()) os << t->get();
  if (const auto* dt = node.as_date_time()) os << dt->get();
  return os.str();
}

std::string describe_node(const toml::node& node) {
  std::string text = node_text(node);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return std::string(node_type_name(node)) + " " + text;
}

}  // namespace zdp::config_internal
