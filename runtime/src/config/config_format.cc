// Config as text: the resolved TOML handed to ranks, the --dry-run view with each value's
// origin, the --help key reference, and value equality; all driven by the key table.
#include <cstdio>

#include "core/internal/output_file.h"
#include "core/internal/sha256.h"
#include "core/internal/utf8.h"
#include "runtime/src/config/config_keys.h"

namespace zdp {
namespace {

using config_internal::KeyInfo;

// Comments must stay on one line whatever a file name contains.
std::string one_line(std::string text) {
  // Into a TOML comment: TOML allows no control character there but tab, and no byte that
  // is not UTF-8; a byte from a --set or a file name (a Latin-1 name) made the resolved
  // config the ranks read unparseable.
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      text[i++] = '?';
      continue;
    }
    char& c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') c = ' ';
    else if ((u < 0x20 && c != '\t') || u == 0x7f) c = '?';
    i += n;
  }
  return text;
}

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string origin_text(const Config& config, const std::string& key) {
  auto it = config.origins.find(key);
  if (it == config.origins.end() || it->second.source == ValueSource::kDefault) return "default";
  return one_line(config.where(key));
}

// "[section]\nkey = value  # comment\n..." for every key; comment(key) may be empty.
template <typename CommentFn>
std::string sections_as_toml(const Config& config, CommentFn comment) {
  std::string out;
  std::string section;
  for (const KeyInfo& k : config_internal::key_table()) {
    if (k.section != section) {
      section = k.section;
      out += (out.empty() ? "" : "\n") + ("[" + section + "]\n");
    }
    const std::string line = k.key + " = " + config_internal::format_value(k, k.get(config));
    const std::string note = comment(k);
    out += note.empty() ? line + "\n" : pad(line, 40) + "  # " + note + "\n";
  }
  return out;
}

}  // namespace

bool operator==(const Config& a, const Config& b) {
  for (const KeyInfo& k : config_internal::key_table()) {
    if (k.get(a) != k.get(b)) return false;
  }
  return true;
}

std::string to_toml(const Config& config) {
  return "# zdp config resolved from " + one_line(config.source) + ": every key, defaults included.\n\n" +
         sections_as_toml(config, [](const KeyInfo&) { return std::string(); });
}

std::string describe_resolved(const Config& config) {
  const std::string body = sections_as_toml(config, [&](const KeyInfo& k) { return origin_text(config, k.name); });
  return "# zdp config resolved from " + one_line(config.source) +
         "\n# precedence: --set > file > default; each value's origin is in its comment\n" +
         config_internal::values_digest_line(body) + "\n\n" + body;
}

namespace config_internal {

std::string values_digest_line(std::string_view body) {
  Sha256 digest;
  digest.update(body.data(), body.size());
  return std::string(kValuesDigestLine) + digest.finish_hex().substr(0, 16);
}

}  // namespace config_internal

std::string key_reference() {
  const Config defaults;
  std::string out =
      "Configuration keys, by TOML section. Set them in the config file under [section], or\n"
      "on the command line with --set section.key=value (the value in TOML syntax; a bare\n"
      "word is a string; --set launch.env.NAME=value sets one variable).\n"
      "Precedence: --set > config file > default.\n";
  std::string section;
  for (const KeyInfo& k : config_internal::key_table()) {
    if (k.section != section) {
      section = k.section;
      out += "\n[" + section + "]\n";
    }
    const std::string assignment = "  " + k.key + " = " + config_internal::format_value(k, k.get(defaults));
    out += pad(assignment, 36) + "  " + config_internal::describe_type(k) + "\n";
    out += "      " + k.doc + "\n";
  }
  return out;
}

Status write_config_file(const Config& config, const std::string& path) {
  // A temporary file and a rename: a rank never reads a half-written config.
  return write_file_atomically(path, describe_resolved(config), "config file");
}

}  // namespace zdp
