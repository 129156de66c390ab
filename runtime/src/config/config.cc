// Parsing of TOML config text into zdp::Config: file, then --set overrides, then cross-field
// checks, every problem collected and reported together. TOML++ stays in src/config/ (override_value.h).
#include "zdp/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/internal/input_file.h"
#include "core/internal/printable.h"
#include "runtime/src/config/config_keys.h"
#include "runtime/src/config/override_value.h"
#include "runtime/src/config/toml_node_text.h"

namespace zdp {
namespace {

using config_internal::describe_node;
using config_internal::KeyInfo;
using config_internal::KeyType;
using config_internal::Value;

// Where a value (or a problem) is: a file position, or the --set that gave it.
struct Place {
  ValueSource source = ValueSource::kFile;
  int line = 0;
  int column = 0;
  std::string override_text;
  int order = 0;  // index of the --set among the overrides
};

struct Problem {
  int group;  // 0: file, 1: --set, 2: cross-field; reported in this order
  int line;   // file: line; --set: index of the override
  int column;
  std::string text;
};

struct Entry {
  const toml::node* node;
  Place place;
};

struct MapEntryOverride {
  const KeyInfo* info;
  std::string entry;
  const toml::node* node;
  Place place;
};

Place file_place(const toml::source_region& region) {
  Place p;
  p.line = static_cast<int>(region.begin.line);
  p.column = static_cast<int>(region.begin.column);
  return p;
}

// An unknown name as an error shows it: in quotes, and cut at 80 characters with its
// length (a name may be as long as the file, whose limit is 1 MiB).
// Control characters are written \xNN (printable): a quoted key's ESC sequences reached the
// terminal as they were.
std::string quoted_name(const std::string& name) {
  constexpr size_t kShown = 80;
  if (name.size() <= kShown) return "'" + printable(name, kShown) + "'";
  return "'" + printable(name.substr(0, kShown), kShown) + "...' (" + std::to_string(name.size()) + " characters)";
}

// A hint for an unknown "section.key": the same key name in another section first (a key
// put in the wrong section), else the nearest name by edit distance.
std::string suggest_key(const std::string& name) {
  const size_t dot = name.find('.');
  const std::string bare = dot == std::string::npos ? name : name.substr(dot + 1);
  std::vector<std::string> all;
  for (const KeyInfo& k : config_internal::key_table()) {
    if (k.key == bare) return "; did you mean '" + k.name + "'?";
    all.push_back(k.name);
  }
  return config_internal::did_you_mean(name, all);
}

bool is_section(const std::string& name) {
  const auto& sections = config_internal::section_names();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

class ConfigParser {
 public:
  explicit ConfigParser(const std::string& source, WorldSizeOf world_of = nullptr) : world_of_(std::move(world_of)) {
    config_.source = source;
  }

  StatusOr<Config> run(const std::string& text, const std::vector<std::string>& overrides) {
    bool syntax_ok = true;
    try {
      root_ = toml::parse(std::string_view(text), std::string_view(config_.source));
    } catch (const toml::parse_error& e) {
      syntax_ok = false;
      error(file_place(e.source()), "invalid TOML: " + std::string(e.description()));
    }
    if (syntax_ok) read_file();
    for (size_t i = 0; i < overrides.size(); ++i) read_override(overrides[i], static_cast<int>(i));
    for (const KeyInfo& info : config_internal::key_table()) {
      auto it = entries_.find(info.name);
      if (it != entries_.end()) apply(info, it->second);
    }
    for (const MapEntryOverride& m : map_entries_) apply_map_entry(m);
    if (syntax_ok) read_forwarded_origins(text);
    if (syntax_ok) {
      std::vector<std::string> cross;
      config_internal::cross_checks(config_, world_size(), failed_, nullptr, &cross);
      for (std::string& c : cross) problems_.push_back(Problem{2, 0, 0, std::move(c)});
    }
    if (problems_.empty()) return std::move(config_);
    std::stable_sort(problems_.begin(), problems_.end(), [](const Problem& a, const Problem& b) {
      return std::tie(a.group, a.line, a.column) < std::tie(b.group, b.line, b.column);
    });
    // Every problem up to a compiler's error limit, then their count: a file of 60,000
    // unknown keys (a data file given as the config) says so in 51 lines, not 60,000.
    constexpr size_t kShownProblems = 50;
    std::string message;
    for (size_t i = 0; i < problems_.size() && i < kShownProblems; ++i) {
      message += (i == 0 ? "" : "\n") + problems_[i].text;
    }
    if (problems_.size() > kShownProblems) {
      message += "\n... and " + std::to_string(problems_.size() - kShownProblems) + " more problems";
    }
    return Status(StatusCode::kInvalidArgument, message);
  }

 private:
  void error(const Place& place, const std::string& text) {
    if (place.source == ValueSource::kOverride) {
      problems_.push_back(Problem{1, place.order, 0, "--set " + place.override_text + ": " + text});
    } else {
      problems_.push_back(Problem{0, place.line, place.column,
                                  config_.source + ":" + std::to_string(place.line) + ":" +
                                      std::to_string(place.column) + ": " + text});
    }
  }

  void read_file() {
    for (auto&& [section_key, section_node] : root_) {
      const std::string section(section_key.str());
      // [section] headers carry the position of their '['; dotted keys only their key's.
      Place place = file_place(section_node.source());
      if (place.line == 0) place = file_place(section_key.source());
      if (!is_section(section)) {
        if (section_node.is_table()) {
          error(place, "unknown section " + quoted_name(section) +
                           config_internal::did_you_mean(section, config_internal::section_names()));
        } else {
          error(file_place(section_key.source()), "unknown key " + quoted_name(section) + " outside any section" +
                                                      suggest_key(section));
        }
        continue;
      }
      if (!section_node.is_table()) {
        error(place, "'" + section + "' must be a section ([" + section + "]), found " + describe_node(section_node));
        continue;
      }
      for (auto&& [key, node] : *section_node.as_table()) {
        const std::string name = section + "." + std::string(key.str());
        if (!config_internal::find_key(name)) {
          // A [section.key] header: its '[' comes before its key; an inline value: the key first.
          const Place key_place = file_place(key.source());
          const Place node_place = file_place(node.source());
          const bool header_first = node_place.line > 0 && std::tie(node_place.line, node_place.column) <
                                                                 std::tie(key_place.line, key_place.column);
          error(header_first ? node_place : key_place, "unknown key " + quoted_name(name) + suggest_key(name));
          continue;
        }
        entries_[name] = Entry{&node, file_place(node.source())};
      }
    }
  }

  void read_override(const std::string& text, int order) {
    Place place;
    place.source = ValueSource::kOverride;
    place.override_text = text;
    place.order = order;
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      error(place, "expected section.key=value");
      return;
    }
    const std::string name = trim(text.substr(0, eq));
    const std::string value_text = trim(text.substr(eq + 1));
    const KeyInfo* info = config_internal::find_key(name);
    const KeyInfo* map_info = nullptr;
    std::string map_entry;
    if (!info) {
      // "launch.env.NAME=value" sets one entry of a table-of-strings key.
      const size_t second_dot = name.find('.', name.find('.') + 1);
      if (name.find('.') != std::string::npos && second_dot != std::string::npos) {
        map_info = config_internal::find_key(name.substr(0, second_dot));
        map_entry = name.substr(second_dot + 1);
        if (map_info && map_info->type != KeyType::kStringMap) map_info = nullptr;
      }
      if (!map_info) {
        error(place, "unknown key " + quoted_name(name) + suggest_key(name));
        return;
      }
    }
    const bool wants_string = map_info || info->type == KeyType::kString || info->type == KeyType::kEnum;
    config_internal::OverrideValue value = config_internal::parse_override_value(value_text, wants_string);
    if (!value.after.empty()) {
      error(place, "text after the value: " + quoted_name(value.after) +
                       " (a --set holds one TOML value; quote a string that holds '#')");
      return;
    }
    override_docs_.push_back(std::move(value.doc));  // owns the node from here
    const toml::node* node = override_docs_.back().get("v");
    if (map_info) {
      map_entries_.push_back(MapEntryOverride{map_info, map_entry, node, place});
    } else {
      entries_[name] = Entry{node, place};  // a later --set of the same key wins
    }
  }

  static std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    const size_t e = s.find_last_not_of(" \t");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }

  // Where an element of an array or table value is: its own position in a file; the
  // --set as a whole for an override.
  static Place inner_place(const Place& outer, const toml::node& inner) {
    return outer.source == ValueSource::kOverride ? outer : file_place(inner.source());
  }

  std::optional<Value> convert(const KeyInfo& info, const toml::node& node, const Place& place) {
    auto mismatch = [&]() -> std::optional<Value> {
      error(place, info.name + ": expected " + config_internal::describe_type(info) + ", found " + describe_node(node));
      return std::nullopt;
    };
    switch (info.type) {
      case KeyType::kInt:
        if (const auto* i = node.as_integer()) return Value(std::in_place_type<int64_t>, i->get());
        return mismatch();
      case KeyType::kIntOrAuto:
        if (const auto* i = node.as_integer()) return Value(std::in_place_type<int64_t>, i->get());
        if (const auto* s = node.as_string()) return Value(s->get());  // check_value accepts only "auto"
        return mismatch();
      case KeyType::kFloat:
        if (const auto* i = node.as_integer()) return Value(std::in_place_type<double>, static_cast<double>(i->get()));
        if (const auto* f = node.as_floating_point()) return Value(std::in_place_type<double>, f->get());
        return mismatch();
      case KeyType::kBool:
        if (const auto* b = node.as_boolean()) return Value(std::in_place_type<bool>, b->get());
        return mismatch();
      case KeyType::kString:
      case KeyType::kEnum:
        if (const auto* s = node.as_string()) return Value(s->get());
        return mismatch();
      case KeyType::kStringList: {
        const auto* array = node.as_array();
        if (!array) return mismatch();
        config_internal::StringList list;
        bool ok = true;
        for (size_t i = 0; i < array->size(); ++i) {
          const toml::node& element = *array->get(i);
          if (const auto* s = element.as_string()) {
            list.push_back(s->get());
          } else {
            error(inner_place(place, element), info.name + "[" + std::to_string(i) + "]: expected string, found " +
                                                   describe_node(element));
            ok = false;
          }
        }
        if (!ok) return std::nullopt;
        return Value(std::move(list));
      }
      case KeyType::kStringMap: {
        const auto* table = node.as_table();
        if (!table) return mismatch();
        config_internal::StringMap map;
        bool ok = true;
        for (auto&& [k, v] : *table) {
          if (const auto* s = v.as_string()) {
            map[std::string(k.str())] = s->get();
          } else {
            error(inner_place(place, v), info.name + "." + std::string(k.str()) + ": expected string, found " +
                                             describe_node(v));
            ok = false;
          }
        }
        if (!ok) return std::nullopt;
        return Value(std::move(map));
      }
    }
    return mismatch();
  }

  void apply(const KeyInfo& info, const Entry& entry) {
    std::optional<Value> value = convert(info, *entry.node, entry.place);
    if (value) {
      const std::string problem = config_internal::check_value(info, *value);
      if (problem.empty()) {
        info.set(config_, *value);
        record_origin(info.name, entry.place);
        return;
      }
      error(entry.place, problem);
    }
    failed_.insert(info.name);
  }

  // REQUIRES: m.node is a string (parse_override_value gives strings to map entries).
  void apply_map_entry(const MapEntryOverride& m) {
    // A later --set of the whole table (launch.env={...}) replaced this entry.
    const auto whole = entries_.find(m.info->name);
    if (whole != entries_.end() && whole->second.place.source == ValueSource::kOverride &&
        whole->second.place.order > m.place.order) {
      return;
    }
    config_internal::StringMap map = std::get<config_internal::StringMap>(m.info->get(config_));
    map[m.entry] = m.node->as_string()->get();
    // The map's checks (names, NULs, UTF-8) for the entry a --set adds, as for a file's.
    const std::string problem = config_internal::check_value(*m.info, Value(map));
    if (!problem.empty()) {
      error(m.place, problem);
      failed_.insert(m.info->name);
      return;
    }
    m.info->set(config_, Value(std::move(map)));
    record_origin(m.info->name, m.place);
  }

  // The byte where code point `column` (1-based, as TOML++ counts) of `line` starts: a
  // value holding multi-byte characters and a '#' ("/d/€€€€#x.bin") was searched from
  // inside its own text, and the rank's errors named "x.bin\"  # file:line" as the place.
  static size_t byte_of_column(std::string_view line, size_t column) {
    size_t at = 0;
    for (size_t c = 1; c < column && at < line.size(); ++c) {
      ++at;
      while (at < line.size() && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) ++at;
    }
    return at;
  }

  // A config dp-launch resolved (describe_resolved's header): each file key's comment,
  // after its value on the same line, is where the user gave it ("default" for none).
  void read_forwarded_origins(const std::string& text) {
    static const std::string kHeader = "# zdp config resolved from ";
    if (text.compare(0, kHeader.size(), kHeader) != 0) return;
    // The comments name the user's places only while the values are those they were written
    // for (an edited copy kept a changed value's comment): else this file's line with them.
    const size_t digest_at = text.find(std::string("\n") + config_internal::kValuesDigestLine);
    const size_t line_end = digest_at == std::string::npos ? digest_at : text.find('\n', digest_at + 1);
    const bool trusted = line_end != std::string::npos && text.compare(line_end, 2, "\n\n") == 0 &&
                         text.substr(digest_at + 1, line_end - digest_at - 1) ==
                             config_internal::values_digest_line(std::string_view(text).substr(line_end + 2));
    std::vector<std::string_view> lines;
    for (size_t begin = 0; begin <= text.size();) {
      const size_t end = std::min(text.find('\n', begin), text.size());
      lines.push_back(std::string_view(text).substr(begin, end - begin));
      begin = end + 1;
    }
    for (const auto& [name, entry] : entries_) {
      if (entry.place.source != ValueSource::kFile) continue;
      const auto it = config_.origins.find(name);
      if (it == config_.origins.end() || it->second.source != ValueSource::kFile) continue;  // a --set beat it
      const toml::source_position end = entry.node->source().end;
      if (end.line == 0 || end.line > lines.size()) continue;
      const std::string_view line = lines[end.line - 1];
      const size_t after = byte_of_column(line, end.column);
      const size_t hash = line.find('#', after);
      if (hash == std::string_view::npos) continue;
      std::string_view origin = line.substr(hash + 1);
      while (!origin.empty() && origin.front() == ' ') origin.remove_prefix(1);
      while (!origin.empty() && (origin.back() == ' ' || origin.back() == '\r')) origin.remove_suffix(1);
      if (origin.empty() || origin == "default") continue;
      it->second.forwarded = trusted ? std::string(origin)
                                     : config_.source + ":" + std::to_string(entry.place.line) + ":" +
                                           std::to_string(entry.place.column) + " (from " + std::string(origin) + ")";
    }
  }

  void record_origin(const std::string& name, const Place& place) {
    KeyOrigin& origin = config_.origins[name];
    origin.source = place.source;
    origin.line = place.source == ValueSource::kFile ? place.line : 0;
    origin.column = place.source == ValueSource::kFile ? place.column : 0;
    origin.override_text = place.override_text;
  }

  Config config_;
  toml::table root_;
  std::map<std::string, Entry> entries_;
  std::vector<MapEntryOverride> map_entries_;
  std::deque<toml::table> override_docs_;  // owns the nodes of --set values
  std::set<std::string> failed_;           // keys whose value was refused: no cross-checks on them
  std::vector<Problem> problems_;
  WorldSizeOf world_of_;
  // The world for the checks that need one (0: none): when the caller derives it and the
  // keys it derives it from parsed.
  int world_size() const {
    if (!world_of_ || failed_.count("launch.nproc_per_node") || failed_.count("launch.nnodes")) return 0;
    const int64_t world = world_of_(config_);
    return world >= 1 && world <= std::numeric_limits<int>::max() ? static_cast<int>(world) : 0;
  }
};

}  // namespace

StatusOr<Config> parse_config(const std::string& text, const std::string& source_name,
                              const std::vector<std::string>& overrides) {
  return ConfigParser(source_name).run(text, overrides);
}

StatusOr<Config> load_config(const std::string& path, const std::vector<std::string>& overrides,
                             const WorldSizeOf& world_size_of) {
  constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 20;  // configs are a few KiB: only /dev/zero-likes stop
  ZDP_ASSIGN_OR_RETURN(const std::string text, read_input_file(path, "config file", kMaxConfigFileBytes));
  return ConfigParser(path, world_size_of).run(text, overrides);
}

}  // namespace zdp
